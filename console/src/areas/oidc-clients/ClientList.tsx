import { useState } from 'react';
import { Anchor, Badge, Checkbox, Group, Radio, Stack, Switch, Text, TextInput, Textarea, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import type { components } from '../../api/schema.gen';
import { useCan, useProjectId } from '../../lib/org';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { CopyOnce } from '../../components/CopyOnce';
import { GatedButton } from '../../components/GatedButton';
import { fieldErrors, unclaimed } from '../../components/forms';
import { checkRedirect, clientTypes, clientsKey, grantTypes, lines, scopes, useClients, when, type ClientType, type GrantType, type Scope } from './lib';

export function ClientList() {
  const projectId = useProjectId()!;
  const clients = useClients(projectId);
  return (
    <Stack>
      <Title order={1}>OIDC clients</Title>
      <Text size="sm">Applications that sign users in through this project with OAuth 2.1 and OpenID Connect.</Text>
      <CreateClient />
      <Title order={2} size="h3">
        Clients
      </Title>
      <QueryView query={clients} empty="No OIDC clients yet.">
        {(rows) => (
          <DataTable
            caption="OIDC clients"
            rows={rows}
            rowKey={(c) => c.id}
            initialSort={{ key: 'name', dir: 'asc' }}
            columns={[
              {
                key: 'name',
                header: 'Name',
                sortValue: (c) => c.name.toLowerCase(),
                render: (c) => (
                  <Anchor component={Link} to={c.id}>
                    {c.name}
                  </Anchor>
                ),
              },
              { key: 'id', header: 'Client id', sortValue: (c) => c.id, render: (c) => <Text size="xs" ff="monospace">{c.id}</Text> },
              { key: 'type', header: 'Type', sortValue: (c) => c.type, render: (c) => c.type },
              { key: 'auth', header: 'Authentication', sortValue: (c) => c.tokenEndpointAuthMethod, render: (c) => c.tokenEndpointAuthMethod },
              { key: 'grants', header: 'Grants', render: (c) => c.grantTypes.join(', ') },
              {
                key: 'state',
                header: 'State',
                sortValue: (c) => (c.disabledAt ? 1 : 0),
                render: (c) => (c.disabledAt ? <Badge color="gray">Disabled</Badge> : <Badge color="teal.9">Enabled</Badge>),
              },
              { key: 'created', header: 'Created', sortValue: (c) => c.createdAt, render: (c) => when(c.createdAt) },
            ]}
          />
        )}
      </QueryView>
    </Stack>
  );
}

type Body = components['schemas']['OidcClientCreate'];
type AuthMethod = NonNullable<Body['tokenEndpointAuthMethod']>;

/** err finds the API's message for a field or any of its items (redirectUris.0 → redirectUris). */
function err(all: Record<string, string>, field: string): string | undefined {
  const hit = Object.entries(all).find(([k]) => k === field || k.startsWith(field + '.'));
  if (!hit) return undefined;
  const item = hit[0].slice(field.length + 1);
  return item && /^\d+/.test(item) ? `Item ${Number(item.split('.')[0]) + 1}: ${hit[1]}` : hit[1];
}

function CreateClient() {
  const projectId = useProjectId()!;
  const can = useCan()('createOidcClient');
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const [type, setType] = useState<ClientType>('web');
  const [auth, setAuth] = useState<AuthMethod>('client_secret_basic');
  const [jwks, setJwks] = useState('');
  const [redirects, setRedirects] = useState('');
  const [logouts, setLogouts] = useState('');
  const [grants, setGrants] = useState<GrantType[]>(['authorization_code', 'refresh_token']);
  const [scopeSel, setScopeSel] = useState<Scope[]>(['openid', 'profile', 'email']);
  const [skipConsent, setSkipConsent] = useState(false);
  const [par, setPar] = useState(false);
  const [local, setLocal] = useState<Record<string, string>>({});
  const isPublic = type !== 'web';
  // Built as sent: fields a public client must not carry are left out (the generated type marks
  // defaulted members required, hence the cast).
  const body = (): Body =>
    ({
    name,
    type,
    redirectUris: lines(redirects),
    ...(lines(logouts).length ? { postLogoutRedirectUris: lines(logouts) } : {}),
    grantTypes: grants,
    scopes: scopeSel,
    ...(isPublic ? {} : { skipConsent, tokenEndpointAuthMethod: auth }),
    ...(!isPublic && auth === 'private_key_jwt' && jwks.trim() ? { jwks: JSON.parse(jwks) } : {}),
    requirePushedAuthorizationRequests: par,
    }) as Body;
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/projects/{projectId}/oidc-clients', { params: { path: { projectId } }, body: body() })).then((r) => r.data),
    onSuccess: () => {
      setName('');
      setRedirects('');
      setLogouts('');
      setJwks('');
      qc.invalidateQueries({ queryKey: clientsKey(projectId) });
    },
  });
  if (!can.allowed)
    return (
      <Text size="sm" c="dimmed" data-testid="create-denied">
        Registering clients: {can.reason}
      </Text>
    );
  // The spec's rules, checked before sending; the API checks them again and its errors[].path
  // lands beside the same fields.
  const validate = () => {
    const e: Record<string, string> = {};
    if (!name.trim()) e.name = 'Required';
    else if (name.length > 100) e.name = 'At most 100 characters';
    const checkList = (field: string, list: string[], min: number) => {
      if (list.length < min) e[field] = 'Add at least one URI';
      else if (list.length > 10) e[field] = 'At most 10 URIs';
      else if (new Set(list).size !== list.length) e[field] = 'No duplicates';
      else
        list.some((u, i) => {
          const bad = checkRedirect(u, type);
          if (bad) e[field] = `Item ${i + 1}: ${bad}`;
          return !!bad;
        });
    };
    checkList('redirectUris', lines(redirects), 1);
    checkList('postLogoutRedirectUris', lines(logouts), 0);
    if (grants.length === 0) e.grantTypes = 'Pick at least one grant';
    else if (grants.includes('client_credentials') && isPublic) e.grantTypes = 'client_credentials is for web clients only';
    else if (grants.includes('refresh_token') && !grants.includes('authorization_code')) e.grantTypes = 'refresh_token needs authorization_code';
    if (scopeSel.length === 0) e.scopes = 'Pick at least one scope';
    if (!isPublic && auth === 'private_key_jwt') {
      if (!jwks.trim()) e.jwks = 'Required for private_key_jwt';
      else
        try {
          const v = JSON.parse(jwks);
          if (!Array.isArray(v?.keys) || v.keys.length < 1 || v.keys.length > 5) e.jwks = 'A JWK Set: {"keys": [1 to 5 public keys]}';
        } catch {
          e.jwks = 'Not valid JSON';
        }
    }
    setLocal(e);
    return Object.keys(e).length === 0;
  };
  const api400 = fieldErrors(create.error);
  const f = (field: string) => local[field] ?? err(api400, field);
  const claimed = Object.keys(api400).filter((k) =>
    ['name', 'type', 'redirectUris', 'postLogoutRedirectUris', 'grantTypes', 'scopes', 'skipConsent', 'tokenEndpointAuthMethod', 'jwks', 'requirePushedAuthorizationRequests'].some(
      (p) => k === p || k.startsWith(p + '.'),
    ),
  );
  const created = create.data;
  return (
    <Stack gap="xs" maw={720}>
      <Title order={2} size="h3">
        Register a client
      </Title>
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          if (validate()) create.mutate();
        }}
      >
        <Stack gap="sm">
          <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={f('name')} maxLength={100} />
          <Radio.Group label="Type" required value={type} onChange={(v) => setType(v as ClientType)} error={f('type')}>
            <Stack gap={6} mt={4}>
              {(Object.keys(clientTypes) as ClientType[]).map((t) => (
                <Radio key={t} value={t} label={clientTypes[t]} />
              ))}
            </Stack>
          </Radio.Group>
          {!isPublic && (
            <Radio.Group label="Token endpoint authentication" value={auth} onChange={(v) => setAuth(v as AuthMethod)} error={f('tokenEndpointAuthMethod')}>
              <Stack gap={6} mt={4}>
                <Radio value="client_secret_basic" label="Client secret (shown once)" />
                <Radio value="private_key_jwt" label="private_key_jwt (signed assertions; no secret)" />
              </Stack>
            </Radio.Group>
          )}
          {!isPublic && auth === 'private_key_jwt' && (
            <Textarea
              label="JWKS"
              required
              description='The client’s public signing keys: {"keys": [...]} with 1 to 5 RSA (≥ 2048 bits) or EC P-256 keys.'
              autosize
              minRows={4}
              ff="monospace"
              value={jwks}
              onChange={(e) => setJwks(e.currentTarget.value)}
              error={f('jwks')}
            />
          )}
          <Textarea
            label="Redirect URIs"
            required
            description={type === 'native' ? 'One a line: https, or http on 127.0.0.1, [::1] or localhost.' : 'One a line, https, matched exactly.'}
            autosize
            minRows={2}
            value={redirects}
            onChange={(e) => setRedirects(e.currentTarget.value)}
            error={f('redirectUris')}
          />
          <Textarea
            label="Post-logout redirect URIs (optional)"
            description="One a line; same rules."
            autosize
            minRows={1}
            value={logouts}
            onChange={(e) => setLogouts(e.currentTarget.value)}
            error={f('postLogoutRedirectUris')}
          />
          <Checkbox.Group label="Grants" required value={grants} onChange={(v) => setGrants(v as GrantType[])} error={f('grantTypes')}>
            <Stack gap={6} mt={4}>
              {(Object.keys(grantTypes) as GrantType[]).map((g) => (
                <Checkbox key={g} value={g} label={grantTypes[g]} disabled={g === 'client_credentials' && isPublic} />
              ))}
            </Stack>
          </Checkbox.Group>
          <Checkbox.Group label="Scopes the client may request" required value={scopeSel} onChange={(v) => setScopeSel(v as Scope[])} error={f('scopes')}>
            <Group gap="md" mt={4}>
              {(Object.keys(scopes) as Scope[]).map((s) => (
                <Checkbox key={s} value={s} label={scopes[s]} />
              ))}
            </Group>
          </Checkbox.Group>
          <Switch
            label="Skip the consent page"
            description={isPublic ? 'Not for public clients (native, spa).' : 'Sign-ins through this client skip the consent page.'}
            checked={skipConsent && !isPublic}
            disabled={isPublic}
            onChange={(e) => setSkipConsent(e.currentTarget.checked)}
            error={f('skipConsent')}
          />
          <Switch
            label="Require pushed authorization requests (PAR)"
            description="Refuse authorization requests that were not pushed to /api/auth/oauth2/par."
            checked={par}
            onChange={(e) => setPar(e.currentTarget.checked)}
            error={f('requirePushedAuthorizationRequests')}
          />
          <ProblemAlert error={unclaimed(create.error, claimed)} />
          <GatedButton op="createOidcClient" type="submit" loading={create.isPending} w="fit-content">
            Register client
          </GatedButton>
        </Stack>
      </form>
      {created && (
        <Stack gap="xs" data-testid="created-client">
          <Text size="sm">
            Registered <strong>{created.name}</strong>. Client id: <code>{created.id}</code>
          </Text>
          {created.clientSecret ? (
            <CopyOnce label="Client secret" value={created.clientSecret} />
          ) : (
            <Text size="sm">
              {created.tokenEndpointAuthMethod === 'private_key_jwt'
                ? 'This client authenticates with assertions signed by its JWKS keys: it has no secret.'
                : 'A public client has no secret; PKCE protects its code exchange.'}
            </Text>
          )}
        </Stack>
      )}
    </Stack>
  );
}
