import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import type { components } from '../../api/schema.gen';

export type OidcClient = components['schemas']['OidcClient'];
export type ClientType = components['schemas']['OidcClientType'];
export type GrantType = components['schemas']['OidcGrantType'];
export type Scope = components['schemas']['OidcScope'];

// The spec's enums, as labels. Record<Enum, …> makes the type check fail when the spec adds or
// drops a value, so these cannot drift from the contract.
export const clientTypes: Record<ClientType, string> = {
  web: 'Web (confidential, server-side; gets a secret or uses private_key_jwt)',
  native: 'Native (public; mobile or desktop app, PKCE)',
  spa: 'Single-page app (public; browser, PKCE)',
};
export const grantTypes: Record<GrantType, string> = {
  authorization_code: 'Authorization code',
  refresh_token: 'Refresh token (with authorization code)',
  client_credentials: 'Client credentials (web clients only)',
};
export const scopes: Record<Scope, string> = {
  openid: 'openid',
  profile: 'profile',
  email: 'email',
  offline_access: 'offline_access',
  organization: 'organization',
  roles: 'roles',
  entitlements: 'entitlements',
  billing: 'billing',
};

export const clientsKey = (projectId: string) => ['projects', projectId, 'oidc-clients'];

export function useClients(projectId: string) {
  return useQuery({
    queryKey: clientsKey(projectId),
    queryFn: () => unwrap(api.GET('/api/v1/projects/{projectId}/oidc-clients', { params: { path: { projectId } } })).then((r) => r.data),
  });
}

export function when(ts: string | null | undefined): string {
  return ts ? new Date(ts).toLocaleString() : '—';
}

/**
 * checkRedirect applies the spec's rule for one redirect URI: absolute, no fragment, no user
 * information, https — or, for a native client, http on the loopback interface.
 */
export function checkRedirect(raw: string, type: ClientType): string | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'Not an absolute URI';
  }
  if (raw.includes('#')) return 'No fragment allowed';
  if (u.username || u.password) return 'No user information allowed';
  if (u.protocol === 'https:') return undefined;
  if (type === 'native' && u.protocol === 'http:' && ['127.0.0.1', '[::1]', 'localhost'].includes(u.hostname)) return undefined;
  return type === 'native' ? 'https, or http on 127.0.0.1, [::1] or localhost' : 'Must be https';
}

/** lines splits a textarea into its non-empty trimmed lines. */
export function lines(s: string): string[] {
  return s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
}
