import { useState } from 'react';
import { Autocomplete, Badge, Code, SegmentedControl, Select, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { useCan, useProjectId } from '../../lib/org';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { ConfirmButton } from '../../components/ConfirmButton';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, unclaimed } from '../../components/forms';
import { bindingsKey, isoFromLocal, principalTypes, useBindings, useRoles, when, type PrincipalType } from './lib';

export function Bindings() {
  const projectId = useProjectId()!;
  const bindings = useBindings(projectId);
  const qc = useQueryClient();
  const [filter, setFilter] = useState('');
  const remove = (bindingId: string) =>
    unwrap(api.DELETE('/api/v1/projects/{projectId}/role-bindings/{bindingId}', { params: { path: { projectId, bindingId } } })).then(() =>
      qc.invalidateQueries({ queryKey: bindingsKey(projectId) }),
    );
  const now = Date.now();
  return (
    <Stack>
      <CreateBinding />
      <Title order={2} size="h3">
        Bindings
      </Title>
      <TextInput label="Filter by principal or role" value={filter} onChange={(e) => setFilter(e.currentTarget.value)} maw={360} />
      <QueryView query={bindings} empty="No bindings yet: bind a role to a user or a service account above.">
        {(all) => {
          const f = filter.trim().toLowerCase();
          const rows = f ? all.filter((b) => b.principalId.toLowerCase().includes(f) || b.roleSlug.includes(f)) : all;
          return (
            <DataTable
              caption="Role bindings"
              rows={rows}
              rowKey={(b) => b.id}
              initialSort={{ key: 'created', dir: 'desc' }}
              columns={[
                { key: 'role', header: 'Role', sortValue: (b) => b.roleSlug, render: (b) => b.roleSlug },
                { key: 'type', header: 'Principal type', sortValue: (b) => b.principalType, render: (b) => b.principalType },
                { key: 'principal', header: 'Principal', sortValue: (b) => b.principalId, render: (b) => <Code>{b.principalId}</Code> },
                {
                  key: 'expires',
                  header: 'Expires',
                  sortValue: (b) => b.expiresAt ?? '9999',
                  render: (b) =>
                    b.expiresAt && Date.parse(b.expiresAt) <= now ? (
                      <Badge color="gray">expired {when(b.expiresAt)}</Badge>
                    ) : (
                      when(b.expiresAt)
                    ),
                },
                { key: 'created', header: 'Created', sortValue: (b) => b.createdAt, render: (b) => when(b.createdAt) },
                {
                  key: 'actions',
                  header: 'Actions',
                  render: (b) => (
                    <ConfirmButton
                      op="deleteRoleBinding"
                      size="xs"
                      title="Delete binding"
                      aria-label={`Delete binding of ${b.roleSlug} to ${b.principalId}`}
                      confirmLabel="Delete binding"
                      message={`${b.principalType} ${b.principalId} loses role ${b.roleSlug}; the very next decision no longer counts it.`}
                      onConfirm={() => remove(b.id)}
                    >
                      Delete
                    </ConfirmButton>
                  ),
                },
              ]}
            />
          );
        }}
      </QueryView>
    </Stack>
  );
}

const bindingFields = ['roleId', 'principalType', 'principalId', 'expiresAt'];

function CreateBinding() {
  const projectId = useProjectId()!;
  const can = useCan()('createRoleBinding');
  const roles = useRoles(projectId);
  const qc = useQueryClient();
  const [roleId, setRoleId] = useState<string | null>(null);
  const [principalType, setPrincipalType] = useState<PrincipalType>('user');
  const [principalId, setPrincipalId] = useState('');
  const [expires, setExpires] = useState('');
  const [local, setLocal] = useState<Record<string, string>>({});
  // Service accounts are offered by id when binding one (typing any id still works).
  const canList = useCan()('listServiceAccounts').allowed;
  const accounts = useQuery({
    queryKey: ['projects', projectId, 'service-accounts'],
    enabled: principalType === 'service_account' && canList,
    queryFn: () =>
      unwrap(api.GET('/api/v1/projects/{projectId}/service-accounts', { params: { path: { projectId } } })).then((r) => r.data),
  });
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/v1/projects/{projectId}/role-bindings', {
          params: { path: { projectId } },
          body: { roleId: roleId ?? '', principalType, principalId, ...(expires ? { expiresAt: isoFromLocal(expires) } : {}) },
        }),
      ),
    onSuccess: () => {
      setPrincipalId('');
      setExpires('');
      qc.invalidateQueries({ queryKey: bindingsKey(projectId) });
    },
  });
  if (!can.allowed)
    return (
      <Text size="sm" c="dimmed" data-testid="create-denied">
        Creating bindings: {can.reason}
      </Text>
    );
  const validate = () => {
    const e: Record<string, string> = {};
    if (!roleId) e.roleId = 'Pick a role';
    if (!principalId.trim()) e.principalId = 'Required';
    else if (principalId.length > 255) e.principalId = 'At most 255 characters';
    if (expires && Date.parse(expires) <= Date.now()) e.expiresAt = 'Must be in the future';
    setLocal(e);
    return Object.keys(e).length === 0;
  };
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        if (validate()) create.mutate();
      }}
    >
      <Stack gap="xs" maw={640}>
        <Title order={2} size="h3">
          Bind a role
        </Title>
        <Select
          label="Role"
          required
          data={(roles.data ?? []).map((r) => ({ value: r.id, label: `${r.name} (${r.slug})` }))}
          value={roleId}
          onChange={setRoleId}
          error={local.roleId ?? fieldError(create.error, 'roleId')}
          placeholder={roles.isPending ? 'Loading…' : 'Choose a role'}
          allowDeselect={false}
          searchable
        />
        <div>
          <Text size="sm" fw={500} id="binding-principal-type">
            Principal type
          </Text>
          <SegmentedControl
            aria-labelledby="binding-principal-type"
            value={principalType}
            onChange={(v) => setPrincipalType(v as PrincipalType)}
            data={principalTypes}
          />
        </div>
        <Autocomplete
          label="Principal id"
          required
          description={principalType === 'user' ? 'Your product’s user id (the sub claim).' : 'A service account id (sa_…).'}
          data={principalType === 'service_account' ? (accounts.data ?? []).map((a) => a.id) : []}
          value={principalId}
          onChange={setPrincipalId}
          error={local.principalId ?? fieldError(create.error, 'principalId')}
          maxLength={255}
        />
        <TextInput
          label="Expires (optional)"
          type="datetime-local"
          value={expires}
          onChange={(e) => setExpires(e.currentTarget.value)}
          error={local.expiresAt ?? fieldError(create.error, 'expiresAt')}
        />
        <ProblemAlert error={unclaimed(create.error, bindingFields)} />
        <GatedButton op="createRoleBinding" type="submit" loading={create.isPending} w="fit-content">
          Create binding
        </GatedButton>
      </Stack>
    </form>
  );
}
