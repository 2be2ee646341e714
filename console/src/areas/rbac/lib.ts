import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import type { components } from '../../api/schema.gen';

export type Role = components['schemas']['ProjectRole'];
export type Binding = components['schemas']['RoleBinding'];
export type PrincipalType = components['schemas']['PrincipalType'];
export type Decision = components['schemas']['AuthorizationDecision'];

export const principalTypes: { value: PrincipalType; label: string }[] = [
  { value: 'user', label: 'User' },
  { value: 'service_account', label: 'Service account' },
];

/** The spec's Permission pattern: `resource:action` in lower case, or `*`. */
export const permissionPattern = /^(\*|[a-z][a-z0-9_-]*:[a-z][a-z0-9_-]*)$/;

export function checkPermission(p: string): string | undefined {
  if (p.length > 128) return 'At most 128 characters';
  return permissionPattern.test(p) ? undefined : 'resource:action in lower case, or *';
}

export const rolesKey = (projectId: string) => ['projects', projectId, 'roles'];
export const bindingsKey = (projectId: string) => ['projects', projectId, 'role-bindings'];

export function useRoles(projectId: string) {
  return useQuery({
    queryKey: rolesKey(projectId),
    queryFn: () => unwrap(api.GET('/api/v1/projects/{projectId}/roles', { params: { path: { projectId } } })).then((r) => r.data),
  });
}

/** Every binding of the project: the API pages by limit/offset (at most 200 a page). */
export function useBindings(projectId: string) {
  return useQuery({
    queryKey: bindingsKey(projectId),
    queryFn: async () => {
      const all: Binding[] = [];
      for (let offset = 0; ; offset += 200) {
        const page = await unwrap(
          api.GET('/api/v1/projects/{projectId}/role-bindings', { params: { path: { projectId }, query: { limit: 200, offset } } }),
        );
        all.push(...page.data);
        if (page.data.length < 200 || all.length >= 5000) return all;
      }
    },
  });
}

export function when(ts: string | null | undefined): string {
  return ts ? new Date(ts).toLocaleString() : '—';
}

export function isoFromLocal(v: string): string | undefined {
  if (!v) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? v : d.toISOString();
}
