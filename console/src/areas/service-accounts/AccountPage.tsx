import { useState } from 'react';
import { Anchor, Badge, Code, Group, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useCan, useProjectId } from '../../lib/org';
import { DataTable } from '../../components/DataTable';
import { Loading } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { CopyOnce } from '../../components/CopyOnce';
import { ConfirmButton } from '../../components/ConfirmButton';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, unclaimed } from '../../components/forms';
import { accountsKey, isoFromLocal, keyState, useProjectEnvironments, useServiceAccounts, when, type ServiceAccount } from './lib';

/** One account: its settings, its keys (mint, revoke) and disable / enable. */
export function AccountPage() {
  const projectId = useProjectId()!;
  const { accountId } = useParams();
  const accounts = useServiceAccounts(projectId);
  const envs = useProjectEnvironments(projectId);
  const qc = useQueryClient();
  const refresh = () => qc.invalidateQueries({ queryKey: accountsKey(projectId) });
  const account = accounts.data?.find((a) => a.id === accountId);
  const back = (
    <Anchor component={Link} to=".." relative="path" size="sm">
      ← All service accounts
    </Anchor>
  );
  if (accounts.isPending) return <Loading />;
  if (accounts.isError)
    return (
      <Stack>
        <Title order={1}>Service account</Title>
        <ProblemAlert error={accounts.error} />
      </Stack>
    );
  if (!account)
    return (
      <Stack>
        <Title order={1}>Service account not found</Title>
        <Text>No service account {accountId} in this project.</Text>
        {back}
      </Stack>
    );
  const path = { projectId, accountId: account.id };
  const setEnabled = (enable: boolean) =>
    unwrap(
      enable
        ? api.POST('/api/v1/projects/{projectId}/service-accounts/{accountId}/enable', { params: { path } })
        : api.POST('/api/v1/projects/{projectId}/service-accounts/{accountId}/disable', { params: { path } }),
    ).then(refresh);
  const revoke = (keyId: string) =>
    unwrap(api.POST('/api/v1/projects/{projectId}/service-accounts/{accountId}/keys/{keyId}/revoke', { params: { path: { ...path, keyId } } })).then(refresh);
  const env = account.environmentId ? (envs.data?.find((e) => e.id === account.environmentId)?.name ?? account.environmentId) : 'All environments';
  return (
    <Stack>
      {back}
      <Title order={1}>Service account {account.name}</Title>
      <Group gap="xs" wrap="wrap">
        {account.disabledAt ? <Badge color="gray">Disabled since {when(account.disabledAt)}</Badge> : <Badge color="teal.9">Enabled</Badge>}
        <Text size="sm">
          Id <Code>{account.id}</Code> · {env}
        </Text>
      </Group>
      {account.description && <Text size="sm">{account.description}</Text>}
      <Group gap={4} aria-label="Scopes">
        <Text size="sm" fw={600} mr={4}>
          Scopes
        </Text>
        {account.scopes.map((s) => (
          <Badge key={s} variant="light" tt="none">
            {s}
          </Badge>
        ))}
      </Group>
      <Group>
        {account.disabledAt ? (
          <ConfirmButton
            op="enableServiceAccount"
            color="teal.9"
            title={`Enable ${account.name}`}
            message="Its unrevoked, unexpired keys authenticate again at once."
            confirmLabel="Enable"
            onConfirm={() => setEnabled(true)}
          >
            Enable account
          </ConfirmButton>
        ) : (
          <ConfirmButton
            op="disableServiceAccount"
            title={`Disable ${account.name}`}
            message="Every key of this account stops authenticating at once (401) until the account is enabled again."
            confirmLabel="Disable"
            onConfirm={() => setEnabled(false)}
          >
            Disable account
          </ConfirmButton>
        )}
      </Group>
      <Title order={2} size="h3">
        Keys
      </Title>
      <AddKey account={account} />
      <DataTable
        caption={`Keys of ${account.name}`}
        rows={account.keys}
        rowKey={(k) => k.id}
        initialSort={{ key: 'created', dir: 'desc' }}
        columns={[
          { key: 'publicId', header: 'Key', sortValue: (k) => k.publicId, render: (k) => <Code>svc_sk_{k.publicId}_…</Code> },
          {
            key: 'state',
            header: 'State',
            sortValue: (k) => keyState(k),
            render: (k) => {
              const s = keyState(k);
              return <Badge color={s === 'active' ? 'teal.9' : 'gray'}>{s}</Badge>;
            },
          },
          { key: 'created', header: 'Created', sortValue: (k) => k.createdAt, render: (k) => when(k.createdAt) },
          { key: 'expires', header: 'Expires', sortValue: (k) => k.expiresAt ?? '', render: (k) => when(k.expiresAt) },
          { key: 'used', header: 'Last used', sortValue: (k) => k.lastUsedAt ?? '', render: (k) => when(k.lastUsedAt) },
          {
            key: 'actions',
            header: 'Actions',
            render: (k) =>
              k.revokedAt ? null : (
                <ConfirmButton
                  op="revokeServiceAccountKey"
                  size="xs"
                  title={`Revoke key ${k.publicId}`}
                  message="The key stops authenticating at once (401). This cannot be undone."
                  confirmLabel="Revoke key"
                  onConfirm={() => revoke(k.id)}
                  aria-label={`Revoke key ${k.publicId}`}
                >
                  Revoke
                </ConfirmButton>
              ),
          },
        ]}
      />
    </Stack>
  );
}

function AddKey({ account }: { account: ServiceAccount }) {
  const projectId = useProjectId()!;
  const can = useCan()('createServiceAccountKey');
  const qc = useQueryClient();
  const [expires, setExpires] = useState('');
  const [local, setLocal] = useState<string>();
  const mint = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/v1/projects/{projectId}/service-accounts/{accountId}/keys', {
          params: { path: { projectId, accountId: account.id } },
          body: expires ? { expiresAt: isoFromLocal(expires) } : {},
        }),
      ).then((r) => r.data),
    onSuccess: () => {
      setExpires('');
      qc.invalidateQueries({ queryKey: accountsKey(projectId) });
    },
  });
  if (!can.allowed) return null;
  return (
    <Stack gap="xs" maw={640}>
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const bad = expires && Date.parse(expires) <= Date.now() ? 'Must be in the future' : undefined;
          setLocal(bad);
          if (!bad) mint.mutate();
        }}
      >
        <Group align="flex-end" wrap="wrap">
          <TextInput
            label="New key expires (optional)"
            type="datetime-local"
            value={expires}
            onChange={(e) => setExpires(e.currentTarget.value)}
            error={local ?? fieldError(mint.error, 'expiresAt')}
          />
          <GatedButton op="createServiceAccountKey" type="submit" loading={mint.isPending}>
            Add key
          </GatedButton>
        </Group>
      </form>
      <ProblemAlert error={unclaimed(mint.error, ['expiresAt'])} />
      {mint.data && <CopyOnce label="API key" value={mint.data.apiKey} />}
    </Stack>
  );
}
