// Members (org scope): members and their roles (change, remove), invitations (invite, cancel)
// and the organization's dynamic roles (create, delete), over better-auth's organization
// routes, gated on their x-member-permission (member:manage).
import { useState } from 'react';
import { Badge, Group, MultiSelect, Select, Stack, Text, TextInput, Textarea, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { useCan, useOrgId } from '../../lib/org';
import { when } from '../../lib/format';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { ConfirmButton } from '../../components/ConfirmButton';
import { GatedButton } from '../../components/GatedButton';
import { fieldError } from '../../components/forms';

const fixedRoles = ['owner', 'admin', 'developer', 'billing', 'viewer'];

function useDynamicRoles(orgId: string) {
  return useQuery({
    queryKey: ['organizations', orgId, 'roles'],
    queryFn: () => unwrap(api.GET('/api/auth/organization/list-roles', { params: { query: { organizationId: orgId } } })),
  });
}

function useRoleOptions(orgId: string): string[] {
  const roles = useDynamicRoles(orgId);
  return [...fixedRoles, ...(roles.data ?? []).map((r) => r.role)];
}

export default function Members() {
  const orgId = useOrgId()!;
  return (
    <Stack gap="xl">
      <Title order={1}>Members</Title>
      <MemberList orgId={orgId} />
      <Invitations orgId={orgId} />
      <DynamicRoles orgId={orgId} />
    </Stack>
  );
}

function MemberList({ orgId }: { orgId: string }) {
  const qc = useQueryClient();
  const key = ['organizations', orgId, 'members'];
  const members = useQuery({
    queryKey: key,
    queryFn: () =>
      unwrap(api.GET('/api/auth/organization/list-members', { params: { query: { organizationId: orgId, limit: 1000 } } })).then((r) => r.members),
  });
  const options = useRoleOptions(orgId);
  const can = useCan();
  const [editing, setEditing] = useState<{ id: string; roles: string[] } | null>(null);
  const update = useMutation({
    mutationFn: (v: { id: string; roles: string[] }) =>
      unwrap(api.POST('/api/auth/organization/update-member-role', { body: { memberId: v.id, role: v.roles, organizationId: orgId } })),
    onSuccess: () => {
      setEditing(null);
      qc.invalidateQueries({ queryKey: ['organizations', orgId] });
    },
  });
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">
        People
      </Title>
      <ProblemAlert error={update.error} />
      <QueryView query={members} empty="No members.">
        {(rows) => (
          <DataTable
            caption="Members"
            rows={rows}
            rowKey={(m) => m.id}
            initialSort={{ key: 'name', dir: 'asc' }}
            columns={[
              { key: 'name', header: 'Name', sortValue: (m) => m.user.name.toLowerCase(), render: (m) => m.user.name },
              { key: 'email', header: 'Email', sortValue: (m) => m.user.email, render: (m) => m.user.email },
              {
                key: 'role',
                header: 'Role',
                sortValue: (m) => m.role,
                render: (m) =>
                  editing?.id === m.id ? (
                    <Group gap={6} wrap="wrap">
                      <MultiSelect
                        aria-label={`Roles of ${m.user.email}`}
                        data={options}
                        value={editing.roles}
                        onChange={(roles) => setEditing({ id: m.id, roles })}
                        miw={200}
                      />
                      <GatedButton op="authUpdateMemberRole" size="xs" onClick={() => update.mutate(editing)} loading={update.isPending} disabled={editing.roles.length === 0}>
                        Save
                      </GatedButton>
                    </Group>
                  ) : (
                    <Text size="sm">{m.role.split(',').map((r) => r.trim()).join(', ')}</Text>
                  ),
              },
              { key: 'joined', header: 'Joined', sortValue: (m) => m.createdAt, render: (m) => when(m.createdAt) },
              {
                key: 'actions',
                header: 'Actions',
                render: (m) =>
                  can('authUpdateMemberRole').allowed ? (
                    <Group gap={6} wrap="wrap">
                      <GatedButton
                        op="authUpdateMemberRole"
                        size="xs"
                        variant="subtle"
                        onClick={() => setEditing({ id: m.id, roles: m.role.split(',').map((r) => r.trim()) })}
                        aria-label={`Change the role of ${m.user.email}`}
                      >
                        Change role
                      </GatedButton>
                      <ConfirmButton
                        op="authRemoveMember"
                        size="xs"
                        title={`Remove ${m.user.email}`}
                        message="They lose access to the organization and its projects at once."
                        confirmLabel="Remove member"
                        onConfirm={() =>
                          unwrap(api.POST('/api/auth/organization/remove-member', { body: { memberIdOrEmail: m.id, organizationId: orgId } })).then(() =>
                            qc.invalidateQueries({ queryKey: ['organizations', orgId] }),
                          )
                        }
                      >
                        Remove
                      </ConfirmButton>
                    </Group>
                  ) : (
                    <Text size="xs" c="dimmed">
                      Managing members needs member:manage
                    </Text>
                  ),
              },
            ]}
          />
        )}
      </QueryView>
    </Stack>
  );
}

function Invitations({ orgId }: { orgId: string }) {
  const qc = useQueryClient();
  const can = useCan()('authInviteMember');
  const options = useRoleOptions(orgId);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<string | null>('developer');
  const key = ['organizations', orgId, 'invitations'];
  const invitations = useQuery({
    queryKey: key,
    queryFn: () => unwrap(api.GET('/api/auth/organization/list-invitations', { params: { query: { organizationId: orgId } } })),
  });
  const invite = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/organization/invite-member', { body: { email, role: role ?? 'developer', organizationId: orgId } })),
    onSuccess: () => {
      setEmail('');
      qc.invalidateQueries({ queryKey: key });
    },
  });
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">
        Invitations
      </Title>
      {can.allowed && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            invite.mutate();
          }}
        >
          <Group align="flex-start" wrap="wrap">
            <TextInput label="Email to invite" type="email" value={email} onChange={(e) => setEmail(e.currentTarget.value)} required error={fieldError(invite.error, 'email')} />
            <Select label="Role" data={options} value={role} onChange={setRole} allowDeselect={false} />
            <GatedButton op="authInviteMember" type="submit" mt={25} loading={invite.isPending}>
              Invite
            </GatedButton>
          </Group>
          <ProblemAlert error={invite.error} />
        </form>
      )}
      <QueryView query={invitations} empty="No invitations.">
        {(rows) => (
          <DataTable
            caption="Invitations"
            rows={rows}
            rowKey={(i) => i.id}
            initialSort={{ key: 'created', dir: 'desc' }}
            columns={[
              { key: 'email', header: 'Email', sortValue: (i) => i.email, render: (i) => i.email },
              { key: 'role', header: 'Role', sortValue: (i) => i.role, render: (i) => i.role },
              { key: 'status', header: 'Status', sortValue: (i) => i.status, render: (i) => <Badge variant="light">{i.status}</Badge> },
              { key: 'expires', header: 'Expires', sortValue: (i) => i.expiresAt, render: (i) => when(i.expiresAt) },
              { key: 'created', header: 'Sent', sortValue: (i) => i.createdAt, render: (i) => when(i.createdAt) },
              {
                key: 'actions',
                header: 'Actions',
                render: (i) =>
                  i.status === 'pending' ? (
                    <ConfirmButton
                      op="authCancelInvitation"
                      size="xs"
                      title={`Cancel the invitation of ${i.email}`}
                      message="The link stops working."
                      confirmLabel="Cancel invitation"
                      onConfirm={() =>
                        unwrap(api.POST('/api/auth/organization/cancel-invitation', { body: { invitationId: i.id } })).then(() => qc.invalidateQueries({ queryKey: key }))
                      }
                    >
                      Cancel
                    </ConfirmButton>
                  ) : null,
              },
            ]}
          />
        )}
      </QueryView>
    </Stack>
  );
}

/** parsePermissions reads "resource: action, action" lines into better-auth's permission map. */
function parsePermissions(text: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const line of text.split('\n')) {
    const [res, acts] = line.split(':');
    if (!res?.trim()) continue;
    out[res.trim()] = (acts ?? '')
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean);
  }
  return out;
}

function DynamicRoles({ orgId }: { orgId: string }) {
  const qc = useQueryClient();
  const roles = useDynamicRoles(orgId);
  const can = useCan()('authCreateRole');
  const [name, setName] = useState('');
  const [perms, setPerms] = useState('');
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/organization/create-role', { body: { role: name, permission: parsePermissions(perms), organizationId: orgId } })),
    onSuccess: () => {
      setName('');
      setPerms('');
      qc.invalidateQueries({ queryKey: ['organizations', orgId, 'roles'] });
    },
  });
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">
        Roles
      </Title>
      <Text size="sm" c="dimmed">
        Fixed roles: {fixedRoles.join(', ')}. Dynamic roles below carry your product's own permissions; they never widen access to this console or /api/v1.
      </Text>
      {can.allowed && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            create.mutate();
          }}
        >
          <Stack gap="xs" maw={520}>
            <TextInput label="Role name" value={name} onChange={(e) => setName(e.currentTarget.value)} required error={fieldError(create.error, 'role')} />
            <Textarea
              label="Permissions"
              description="One resource per line: ticket: read, update"
              value={perms}
              onChange={(e) => setPerms(e.currentTarget.value)}
              autosize
              minRows={2}
              error={fieldError(create.error, 'permission')}
            />
            <ProblemAlert error={create.error} />
            <GatedButton op="authCreateRole" type="submit" loading={create.isPending} w="fit-content">
              Create role
            </GatedButton>
          </Stack>
        </form>
      )}
      <QueryView query={roles} empty="No dynamic roles.">
        {(rows) => (
          <DataTable
            caption="Dynamic roles"
            rows={rows}
            rowKey={(r) => r.id}
            initialSort={{ key: 'role', dir: 'asc' }}
            columns={[
              { key: 'role', header: 'Role', sortValue: (r) => r.role, render: (r) => r.role },
              {
                key: 'perms',
                header: 'Permissions',
                render: (r) => (
                  <Text size="xs" ff="monospace">
                    {Object.entries(r.permission)
                      .map(([res, acts]) => `${res}: ${(acts as string[]).join(', ')}`)
                      .join('; ')}
                  </Text>
                ),
              },
              {
                key: 'actions',
                header: 'Actions',
                render: (r) => (
                  <ConfirmButton
                    op="authDeleteRole"
                    size="xs"
                    title={`Delete the role ${r.role}`}
                    message="Refused while a member holds it."
                    confirmLabel="Delete role"
                    onConfirm={() =>
                      unwrap(api.POST('/api/auth/organization/delete-role', { body: { roleName: r.role, organizationId: orgId } })).then(() =>
                        qc.invalidateQueries({ queryKey: ['organizations', orgId, 'roles'] }),
                      )
                    }
                  >
                    Delete
                  </ConfirmButton>
                ),
              },
            ]}
          />
        )}
      </QueryView>
    </Stack>
  );
}
