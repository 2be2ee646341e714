// Permission gating from the spec: an operation's x-permission (permissions.gen.ts, generated
// from openapi/openapi.json) against the member's permissions in the current organization
// (GET /api/v1/organizations/{organizationId}/permissions). The API still decides every
// request; this only decides what the console offers.
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from './client';
import { operations, type OperationId } from './permissions.gen';

export type { OperationId };

export interface Grant {
  allowed: boolean;
  /** Why not, in a sentence for a tooltip or a note, when not allowed. */
  reason?: string;
}

/** The caller's role and permissions in an organization. */
export function useMemberPermissions(organizationId: string | undefined) {
  return useQuery({
    queryKey: ['organizations', organizationId, 'permissions'],
    enabled: !!organizationId,
    staleTime: 30_000,
    queryFn: () =>
      unwrap(
        api.GET('/api/v1/organizations/{organizationId}/permissions', {
          params: { path: { organizationId: organizationId! } },
        }),
      ).then((r) => r.data),
  });
}

/** grant decides whether a member with `held` permissions (and `role`) may call the operation. */
export function grant(op: OperationId, role: string | undefined, held: readonly string[] | undefined): Grant {
  const rule = operations[op];
  const needed = rule.permission as readonly string[];
  if (needed.includes('none') || needed.includes('session')) return { allowed: true };
  if (!held) return { allowed: false, reason: 'Checking your permissions…' };
  const missing = needed.filter((p) => !held.includes(p));
  if (missing.length === 0) return { allowed: true };
  return {
    allowed: false,
    reason: `Your role (${role ?? 'none'}) lacks ${missing.join(', ')}.`,
  };
}
