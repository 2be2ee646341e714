// Shared by the service-account views: the account list query, the project's environments,
// and the permission list the scope picker offers.
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { operations } from '../../api/permissions.gen';
import type { components } from '../../api/schema.gen';

export type ServiceAccount = components['schemas']['ServiceAccount'];
export type ApiKey = components['schemas']['ApiKey'];

export const accountsKey = (projectId: string) => ['projects', projectId, 'service-accounts'];

export function useServiceAccounts(projectId: string) {
  return useQuery({
    queryKey: accountsKey(projectId),
    queryFn: () =>
      unwrap(api.GET('/api/v1/projects/{projectId}/service-accounts', { params: { path: { projectId } } })).then((r) => r.data),
  });
}

/** The project with its three environments (for pinning and for naming a pinned account's). */
export function useProjectEnvironments(projectId: string) {
  return useQuery({
    queryKey: ['projects', projectId],
    queryFn: () => unwrap(api.GET('/api/v1/projects/{projectId}', { params: { path: { projectId } } })).then((r) => r.data),
    select: (p) => p.environments,
  });
}

/**
 * The control-plane permissions a service account's scopes may name: every permission some
 * operation's x-permission requires (permissions.gen.ts, generated from the spec), sorted,
 * and `*`. No second table: a permission the spec adds appears here at the next build.
 */
export const scopeChoices: string[] = [
  '*',
  ...Array.from(
    new Set(
      Object.values(operations)
        .flatMap((o) => o.permission as readonly string[])
        .filter((p) => p !== 'none' && p !== 'session'),
    ),
  ).sort(),
];

/** A key's state for its badge. */
export function keyState(k: ApiKey, now = Date.now()): 'revoked' | 'expired' | 'active' {
  if (k.revokedAt) return 'revoked';
  if (k.expiresAt && Date.parse(k.expiresAt) <= now) return 'expired';
  return 'active';
}

/** The RFC 3339 instant of a datetime-local input's value, or undefined when empty. */
export function isoFromLocal(v: string): string | undefined {
  if (!v) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? v : d.toISOString();
}

export function when(ts: string | null | undefined): string {
  return ts ? new Date(ts).toLocaleString() : '—';
}
