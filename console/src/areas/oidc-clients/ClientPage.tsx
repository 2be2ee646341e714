import { useState } from 'react';
import { Anchor, Badge, Code, Group, List, Stack, Table, Text, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useProjectId } from '../../lib/org';
import { Loading } from '../../components/States';
import { ScrollRegion } from '../../components/ScrollRegion';
import { ProblemAlert } from '../../components/ProblemAlert';
import { CopyOnce } from '../../components/CopyOnce';
import { ConfirmButton } from '../../components/ConfirmButton';
import { clientsKey, useClients, when } from './lib';
import { EditClient } from './EditClient';

/** One client: its registration, secret rotation, and disable / enable. */
export function ClientPage() {
  const projectId = useProjectId()!;
  const { clientId } = useParams();
  const clients = useClients(projectId);
  const qc = useQueryClient();
  const [secret, setSecret] = useState<string>();
  const refresh = () => qc.invalidateQueries({ queryKey: clientsKey(projectId) });
  const back = (
    <Anchor component={Link} to=".." relative="path" size="sm">
      ← All OIDC clients
    </Anchor>
  );
  if (clients.isPending) return <Loading />;
  if (clients.isError)
    return (
      <Stack>
        <Title order={1}>OIDC client</Title>
        <ProblemAlert error={clients.error} />
      </Stack>
    );
  const c = clients.data.find((x) => x.id === clientId);
  if (!c)
    return (
      <Stack>
        <Title order={1}>OIDC client not found</Title>
        <Text>No OIDC client {clientId} in this project.</Text>
        {back}
      </Stack>
    );
  const path = { projectId, clientId: c.id };
  const setEnabled = (enable: boolean) =>
    unwrap(
      enable
        ? api.POST('/api/v1/projects/{projectId}/oidc-clients/{clientId}/enable', { params: { path } })
        : api.POST('/api/v1/projects/{projectId}/oidc-clients/{clientId}/disable', { params: { path } }),
    ).then(refresh);
  const rotate = () =>
    unwrap(api.POST('/api/v1/projects/{projectId}/oidc-clients/{clientId}/rotate-secret', { params: { path } })).then((r) => {
      setSecret(r.data.clientSecret);
      return refresh();
    });
  const uriList = (uris: string[]) =>
    uris.length === 0 ? (
      <Text size="sm">none</Text>
    ) : (
      <List size="sm">
        {uris.map((u) => (
          <List.Item key={u} style={{ wordBreak: 'break-all' }}>
            {u}
          </List.Item>
        ))}
      </List>
    );
  const rows: [string, React.ReactNode][] = [
    ['Client id', <Code key="id">{c.id}</Code>],
    ['Type', c.type],
    ['Token endpoint authentication', c.tokenEndpointAuthMethod],
    ['Redirect URIs', uriList(c.redirectUris)],
    ['Post-logout redirect URIs', uriList(c.postLogoutRedirectUris)],
    ['Grants', c.grantTypes.join(', ')],
    ['Scopes', c.scopes.join(', ')],
    ['Skip consent', c.skipConsent ? 'yes' : 'no'],
    ['Require PAR', c.requirePushedAuthorizationRequests ? 'yes' : 'no'],
    ['Created', when(c.createdAt)],
    ['Updated', when(c.updatedAt)],
  ];
  return (
    <Stack>
      {back}
      <Title order={1}>OIDC client {c.name}</Title>
      <Group gap="xs">{c.disabledAt ? <Badge color="gray">Disabled since {when(c.disabledAt)}</Badge> : <Badge color="teal.9">Enabled</Badge>}</Group>
      <ScrollRegion label="Client registration" minWidth={320}>
        <Table variant="vertical" withTableBorder>
          <Table.Tbody>
            {rows.map(([k, v]) => (
              <Table.Tr key={k}>
                <Table.Th w={200}>{k}</Table.Th>
                <Table.Td>{v}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </ScrollRegion>
      {c.jwks && (
        <Stack gap={4}>
          <Title order={2} size="h3">
            JWKS
          </Title>
          <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
            {JSON.stringify(c.jwks, null, 2)}
          </Code>
        </Stack>
      )}
      <Group wrap="wrap">
        <EditClient client={c} />
        {c.type === 'web' && c.tokenEndpointAuthMethod !== 'private_key_jwt' && (
          <ConfirmButton
            op="rotateOidcClientSecret"
            color="orange.9"
            title={`Rotate the secret of ${c.name}`}
            message="A new secret is drawn and shown once. The current secret stops authenticating at once — there is no overlap — so deploy the new one right away."
            confirmLabel="Rotate secret"
            onConfirm={rotate}
          >
            Rotate secret
          </ConfirmButton>
        )}
        {c.disabledAt ? (
          <ConfirmButton op="enableOidcClient" color="teal.9" title={`Enable ${c.name}`} message="The client authenticates again with its current secret or keys." confirmLabel="Enable" onConfirm={() => setEnabled(true)}>
            Enable client
          </ConfirmButton>
        ) : (
          <ConfirmButton
            op="disableOidcClient"
            title={`Disable ${c.name}`}
            message="The client gets invalid_client at every protocol route and the tokens issued to it introspect inactive."
            confirmLabel="Disable"
            onConfirm={() => setEnabled(false)}
          >
            Disable client
          </ConfirmButton>
        )}
      </Group>
      {secret && <CopyOnce label="Client secret" value={secret} />}
    </Stack>
  );
}
