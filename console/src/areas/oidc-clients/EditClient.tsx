import { useState } from 'react';
import { Button, Checkbox, Group, Modal, Stack, Switch, TextInput, Textarea } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import type { components } from '../../api/schema.gen';
import { useCan, useProjectId } from '../../lib/org';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { fieldErrors, unclaimed } from '../../components/forms';
import { checkRedirect, clientsKey, grantTypes, lines, scopes, type GrantType, type OidcClient, type Scope } from './lib';

type Body = components['schemas']['OidcClientUpdate'];
const editable = ['name', 'redirectUris', 'postLogoutRedirectUris', 'grantTypes', 'scopes', 'skipConsent', 'jwks', 'requirePushedAuthorizationRequests'];

/** EditClient changes a client's registration (PATCH): type and authentication method stay. */
export function EditClient({ client }: { client: OidcClient }) {
  const can = useCan()('updateOidcClient');
  const [open, setOpen] = useState(false);
  if (!can.allowed) return <GatedButton op="updateOidcClient">Edit registration</GatedButton>;
  return (
    <>
      <GatedButton op="updateOidcClient" variant="default" onClick={() => setOpen(true)}>
        Edit registration
      </GatedButton>
      <Modal opened={open} onClose={() => setOpen(false)} title={`Edit ${client.name}`} size="lg" closeButtonProps={{ 'aria-label': 'Close' }}>
        {open && <EditForm client={client} onDone={() => setOpen(false)} />}
      </Modal>
    </>
  );
}

function err(all: Record<string, string>, field: string): string | undefined {
  const hit = Object.entries(all).find(([k]) => k === field || k.startsWith(field + '.'));
  if (!hit) return undefined;
  const item = hit[0].slice(field.length + 1);
  return item && /^\d+/.test(item) ? `Item ${Number(item.split('.')[0]) + 1}: ${hit[1]}` : hit[1];
}

function EditForm({ client, onDone }: { client: OidcClient; onDone: () => void }) {
  const projectId = useProjectId()!;
  const qc = useQueryClient();
  const isPublic = client.type !== 'web';
  const keyAuth = client.tokenEndpointAuthMethod === 'private_key_jwt';
  const [name, setName] = useState(client.name);
  const [redirects, setRedirects] = useState(client.redirectUris.join('\n'));
  const [logouts, setLogouts] = useState(client.postLogoutRedirectUris.join('\n'));
  const [grants, setGrants] = useState<GrantType[]>(client.grantTypes);
  const [scopeSel, setScopeSel] = useState<Scope[]>(client.scopes);
  const [skipConsent, setSkipConsent] = useState(client.skipConsent);
  const [par, setPar] = useState(client.requirePushedAuthorizationRequests);
  const initialJwks = client.jwks ? JSON.stringify(client.jwks, null, 2) : '';
  const [jwks, setJwks] = useState(initialJwks);
  const [local, setLocal] = useState<Record<string, string>>({});
  const save = useMutation({
    mutationFn: () => {
      const body: Body = {
        name,
        redirectUris: lines(redirects),
        postLogoutRedirectUris: lines(logouts),
        grantTypes: grants,
        scopes: scopeSel,
        requirePushedAuthorizationRequests: par,
        ...(isPublic ? {} : { skipConsent }),
        ...(keyAuth && jwks !== initialJwks ? { jwks: JSON.parse(jwks) } : {}),
      };
      return unwrap(
        api.PATCH('/api/v1/projects/{projectId}/oidc-clients/{clientId}', { params: { path: { projectId, clientId: client.id } }, body }),
      );
    },
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: clientsKey(projectId) });
      onDone();
    },
  });
  const validate = () => {
    const e: Record<string, string> = {};
    if (!name.trim()) e.name = 'Required';
    const checkList = (field: string, list: string[], min: number) => {
      if (list.length < min) e[field] = 'Add at least one URI';
      else if (list.length > 10) e[field] = 'At most 10 URIs';
      else if (new Set(list).size !== list.length) e[field] = 'No duplicates';
      else
        list.some((u, i) => {
          const bad = checkRedirect(u, client.type);
          if (bad) e[field] = `Item ${i + 1}: ${bad}`;
          return !!bad;
        });
    };
    checkList('redirectUris', lines(redirects), 1);
    checkList('postLogoutRedirectUris', lines(logouts), 0);
    if (grants.length === 0) e.grantTypes = 'Pick at least one grant';
    else if (grants.includes('refresh_token') && !grants.includes('authorization_code')) e.grantTypes = 'refresh_token needs authorization_code';
    if (scopeSel.length === 0) e.scopes = 'Pick at least one scope';
    if (keyAuth && jwks !== initialJwks) {
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
  const api400 = fieldErrors(save.error);
  const f = (field: string) => local[field] ?? err(api400, field);
  const claimed = Object.keys(api400).filter((k) => editable.some((p) => k === p || k.startsWith(p + '.')));
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        if (validate()) save.mutate();
      }}
    >
      <Stack gap="sm">
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={f('name')} maxLength={100} />
        <Textarea label="Redirect URIs" required description="One a line." autosize minRows={2} value={redirects} onChange={(e) => setRedirects(e.currentTarget.value)} error={f('redirectUris')} />
        <Textarea label="Post-logout redirect URIs" description="One a line." autosize minRows={1} value={logouts} onChange={(e) => setLogouts(e.currentTarget.value)} error={f('postLogoutRedirectUris')} />
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
        {!isPublic && <Switch label="Skip the consent page" checked={skipConsent} onChange={(e) => setSkipConsent(e.currentTarget.checked)} error={f('skipConsent')} />}
        <Switch label="Require pushed authorization requests (PAR)" checked={par} onChange={(e) => setPar(e.currentTarget.checked)} error={f('requirePushedAuthorizationRequests')} />
        {keyAuth && <Textarea label="JWKS" required autosize minRows={4} ff="monospace" value={jwks} onChange={(e) => setJwks(e.currentTarget.value)} error={f('jwks')} />}
        <ProblemAlert error={unclaimed(save.error, claimed)} />
        <Group>
          <GatedButton op="updateOidcClient" type="submit" loading={save.isPending}>
            Save registration
          </GatedButton>
          <Button variant="default" onClick={onDone}>
            Cancel
          </Button>
        </Group>
      </Stack>
    </form>
  );
}
