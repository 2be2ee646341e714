import { useState } from 'react';
import { Anchor, Badge, Group, MultiSelect, Select, Stack, Text, TextInput, Textarea, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useCan, useProjectId } from '../../lib/org';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { CopyOnce } from '../../components/CopyOnce';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, fieldErrors, unclaimed } from '../../components/forms';
import { accountsKey, isoFromLocal, keyState, scopeChoices, useProjectEnvironments, useServiceAccounts, when } from './lib';

export function AccountList() {
  const projectId = useProjectId()!;
  const accounts = useServiceAccounts(projectId);
  const envs = useProjectEnvironments(projectId);
  const envName = (id: string | null) => (id ? (envs.data?.find((e) => e.id === id)?.name ?? id) : 'All environments');
  return (
    <Stack>
      <Title order={1}>Service accounts</Title>
      <Text size="sm">Machine identities of this project. Each key authenticates as its account with the account’s scopes.</Text>
      <CreateAccount />
      <Title order={2} size="h3">
        Accounts
      </Title>
      <QueryView query={accounts} empty="No service accounts yet.">
        {(rows) => (
          <DataTable
            caption="Service accounts"
            rows={rows}
            rowKey={(a) => a.id}
            initialSort={{ key: 'name', dir: 'asc' }}
            columns={[
              {
                key: 'name',
                header: 'Name',
                sortValue: (a) => a.name.toLowerCase(),
                render: (a) => (
                  <Anchor component={Link} to={a.id}>
                    {a.name}
                  </Anchor>
                ),
              },
              { key: 'env', header: 'Environment', sortValue: (a) => envName(a.environmentId), render: (a) => envName(a.environmentId) },
              {
                key: 'scopes',
                header: 'Scopes',
                render: (a) => (
                  <Group gap={4}>
                    {a.scopes.map((s) => (
                      <Badge key={s} variant="light" tt="none">
                        {s}
                      </Badge>
                    ))}
                  </Group>
                ),
              },
              {
                key: 'keys',
                header: 'Active keys',
                sortValue: (a) => a.keys.filter((k) => keyState(k) === 'active').length,
                render: (a) => a.keys.filter((k) => keyState(k) === 'active').length,
              },
              {
                key: 'state',
                header: 'State',
                sortValue: (a) => (a.disabledAt ? 1 : 0),
                render: (a) => (a.disabledAt ? <Badge color="gray">Disabled</Badge> : <Badge color="teal.9">Enabled</Badge>),
              },
              { key: 'created', header: 'Created', sortValue: (a) => a.createdAt, render: (a) => when(a.createdAt) },
            ]}
          />
        )}
      </QueryView>
    </Stack>
  );
}

const fields = ['name', 'description', 'environmentId', 'scopes', 'expiresAt'];

function CreateAccount() {
  const projectId = useProjectId()!;
  const can = useCan()('createServiceAccount');
  const envs = useProjectEnvironments(projectId);
  const qc = useQueryClient();
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [environmentId, setEnvironmentId] = useState<string>('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [expires, setExpires] = useState('');
  const [local, setLocal] = useState<Record<string, string>>({});
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/v1/projects/{projectId}/service-accounts', {
          params: { path: { projectId } },
          body: {
            name,
            scopes,
            ...(description ? { description } : {}),
            ...(environmentId ? { environmentId } : {}),
            ...(expires ? { expiresAt: isoFromLocal(expires) } : {}),
          },
        }),
      ).then((r) => r.data),
    onSuccess: () => {
      setName('');
      setDescription('');
      setScopes([]);
      setExpires('');
      qc.invalidateQueries({ queryKey: accountsKey(projectId) });
    },
  });
  if (!can.allowed) {
    return (
      <Text size="sm" c="dimmed" data-testid="create-denied">
        Creating service accounts: {can.reason}
      </Text>
    );
  }
  // The spec's rules, checked before sending (the API checks them again): a name of 1 to 100
  // characters, 1 to 50 scopes.
  const validate = () => {
    const e: Record<string, string> = {};
    if (!name.trim()) e.name = 'Required';
    else if (name.length > 100) e.name = 'At most 100 characters';
    if (scopes.length === 0) e.scopes = 'Pick at least one scope';
    else if (scopes.length > 50) e.scopes = 'At most 50 scopes';
    if (expires && Date.parse(expires) <= Date.now()) e.expiresAt = 'Must be in the future';
    setLocal(e);
    return Object.keys(e).length === 0;
  };
  const apiErr = fieldErrors(create.error);
  const scopeErr = local.scopes ?? Object.entries(apiErr).find(([k]) => k === 'scopes' || k.startsWith('scopes.'))?.[1];
  const created = create.data;
  return (
    <Stack gap="xs" maw={640}>
      <Title order={2} size="h3">
        Create a service account
      </Title>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (validate()) create.mutate();
        }}
        noValidate
      >
        <Stack gap="xs">
          <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={local.name ?? fieldError(create.error, 'name')} maxLength={100} />
          <Textarea label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} error={fieldError(create.error, 'description')} maxLength={500} autosize minRows={1} />
          <Select
            label="Environment"
            description="Pin the account to one environment, or let it address all three."
            data={[{ value: '', label: 'All environments' }, ...(envs.data ?? []).map((e) => ({ value: e.id, label: e.name }))]}
            value={environmentId}
            onChange={(v) => setEnvironmentId(v ?? '')}
            allowDeselect={false}
            error={fieldError(create.error, 'environmentId')}
          />
          <MultiSelect
            label="Scopes"
            required
            description="Control-plane permissions every key of the account carries; * grants all."
            data={scopeChoices}
            value={scopes}
            onChange={setScopes}
            searchable
            error={scopeErr}
            comboboxProps={{ withinPortal: true }}
          />
          <TextInput
            label="First key expires (optional)"
            type="datetime-local"
            value={expires}
            onChange={(e) => setExpires(e.currentTarget.value)}
            error={local.expiresAt ?? fieldError(create.error, 'expiresAt')}
          />
          <ProblemAlert error={unclaimed(create.error, [...fields, ...Object.keys(apiErr).filter((k) => k.startsWith('scopes.'))])} />
          <GatedButton op="createServiceAccount" type="submit" loading={create.isPending} w="fit-content">
            Create service account
          </GatedButton>
        </Stack>
      </form>
      {created && (
        <Stack gap="xs" data-testid="created-account">
          <Text size="sm">
            Created <strong>{created.name}</strong> ({created.id}).
          </Text>
          <CopyOnce label="API key" value={created.apiKey} />
        </Stack>
      )}
    </Stack>
  );
}
