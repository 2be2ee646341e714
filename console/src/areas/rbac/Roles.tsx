import { useState } from 'react';
import { Badge, Button, Checkbox, Group, Modal, Stack, TagsInput, Text, TextInput, Textarea, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { useCan, useProjectId } from '../../lib/org';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { ConfirmButton } from '../../components/ConfirmButton';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, fieldErrors, unclaimed } from '../../components/forms';
import { bindingsKey, checkPermission, rolesKey, useRoles, when, type Role } from './lib';

export function Roles() {
  const projectId = useProjectId()!;
  const roles = useRoles(projectId);
  const qc = useQueryClient();
  const [editing, setEditing] = useState<Role | null>(null);
  const can = useCan();
  return (
    <Stack>
      <RoleForm key="create" />
      <Title order={2} size="h3">
        Roles
      </Title>
      <QueryView query={roles} empty="No roles yet.">
        {(rows) => (
          <DataTable
            caption="Project roles"
            rows={rows}
            rowKey={(r) => r.id}
            initialSort={{ key: 'name', dir: 'asc' }}
            columns={[
              { key: 'name', header: 'Name', sortValue: (r) => r.name.toLowerCase(), render: (r) => r.name },
              { key: 'slug', header: 'Slug', sortValue: (r) => r.slug, render: (r) => r.slug },
              {
                key: 'permissions',
                header: 'Permissions',
                sortValue: (r) => r.permissions.length,
                render: (r) =>
                  r.permissions.length === 0 ? (
                    <Text size="sm">none</Text>
                  ) : (
                    <Group gap={4}>
                      {r.permissions.map((p) => (
                        <Badge key={p} variant="light" tt="none">
                          {p}
                        </Badge>
                      ))}
                    </Group>
                  ),
              },
              { key: 'updated', header: 'Updated', sortValue: (r) => r.updatedAt, render: (r) => when(r.updatedAt) },
              {
                key: 'actions',
                header: 'Actions',
                render: (r) => (
                  <Group gap="xs" wrap="nowrap">
                    <GatedButton op="updateProjectRole" size="xs" variant="default" onClick={() => setEditing(r)} aria-label={`Edit role ${r.slug}`}>
                      Edit
                    </GatedButton>
                    <DeleteRole role={r} onDone={() => qc.invalidateQueries({ queryKey: ['projects', projectId] })} />
                  </Group>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <Modal opened={!!editing && can('updateProjectRole').allowed} onClose={() => setEditing(null)} title={`Edit role ${editing?.name ?? ''}`} size="lg" closeButtonProps={{ 'aria-label': 'Close' }}>
        {editing && <RoleForm key={editing.id} role={editing} onDone={() => setEditing(null)} />}
      </Modal>
    </Stack>
  );
}

function DeleteRole({ role, onDone }: { role: Role; onDone: () => void }) {
  const projectId = useProjectId()!;
  const [force, setForce] = useState(false);
  return (
    <ConfirmButton
      op="deleteProjectRole"
      size="xs"
      title={`Delete role ${role.slug}`}
      aria-label={`Delete role ${role.slug}`}
      confirmLabel="Delete role"
      message={
        <Stack gap="xs" component="span">
          <span>The role is deleted; decisions stop counting it at once. A role still bound is refused unless its bindings go too.</span>
          <Checkbox label="Also delete its bindings" checked={force} onChange={(e) => setForce(e.currentTarget.checked)} />
        </Stack>
      }
      onConfirm={() =>
        unwrap(
          api.DELETE('/api/v1/projects/{projectId}/roles/{roleId}', {
            params: { path: { projectId, roleId: role.id }, query: force ? { force: true } : {} },
          }),
        ).then(onDone)
      }
    >
      Delete
    </ConfirmButton>
  );
}

const roleFields = ['name', 'slug', 'description', 'permissions'];

/** RoleForm creates a role, or (with role) edits it. */
function RoleForm({ role, onDone }: { role?: Role; onDone?: () => void }) {
  const projectId = useProjectId()!;
  const op = role ? 'updateProjectRole' : 'createProjectRole';
  const can = useCan()(op);
  const qc = useQueryClient();
  const [name, setName] = useState(role?.name ?? '');
  const [slug, setSlug] = useState(role?.slug ?? '');
  const [description, setDescription] = useState(role?.description ?? '');
  const [permissions, setPermissions] = useState<string[]>(role?.permissions ?? []);
  const [local, setLocal] = useState<Record<string, string>>({});
  const save = useMutation({
    mutationFn: () =>
      role
        ? unwrap(
            api.PATCH('/api/v1/projects/{projectId}/roles/{roleId}', {
              params: { path: { projectId, roleId: role.id } },
              body: { name, permissions, description, ...(slug !== role.slug ? { slug } : {}) },
            }),
          )
        : unwrap(
            api.POST('/api/v1/projects/{projectId}/roles', {
              params: { path: { projectId } },
              body: { name, permissions, ...(slug ? { slug } : {}), ...(description ? { description } : {}) },
            }),
          ),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: rolesKey(projectId) });
      qc.invalidateQueries({ queryKey: bindingsKey(projectId) });
      if (!role) {
        setName('');
        setSlug('');
        setDescription('');
        setPermissions([]);
      }
      onDone?.();
    },
  });
  if (!can.allowed) {
    return role ? null : (
      <Text size="sm" c="dimmed" data-testid="create-denied">
        Creating roles: {can.reason}
      </Text>
    );
  }
  const validate = () => {
    const e: Record<string, string> = {};
    if (!name.trim()) e.name = 'Required';
    else if (name.length > 100) e.name = 'At most 100 characters';
    if (permissions.length > 100) e.permissions = 'At most 100 permissions';
    const bad = permissions.find((p) => checkPermission(p));
    if (bad) e.permissions = `${bad}: ${checkPermission(bad)}`;
    setLocal(e);
    return Object.keys(e).length === 0;
  };
  const apiErr = fieldErrors(save.error);
  const permErr = local.permissions ?? Object.entries(apiErr).find(([k]) => k === 'permissions' || k.startsWith('permissions.'))?.[1];
  const permKeys = Object.keys(apiErr).filter((k) => k.startsWith('permissions.'));
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        if (validate()) save.mutate();
      }}
    >
      <Stack gap="xs" maw={640}>
        {!role && (
          <Title order={2} size="h3">
            Create a role
          </Title>
        )}
        <Group grow align="flex-start" wrap="wrap" preventGrowOverflow={false}>
          <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={local.name ?? fieldError(save.error, 'name')} maxLength={100} miw={200} />
          <TextInput label="Slug" description={role ? undefined : 'Defaults to the name, slugified'} value={slug} onChange={(e) => setSlug(e.currentTarget.value)} error={fieldError(save.error, 'slug')} miw={200} />
        </Group>
        <Textarea label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} error={fieldError(save.error, 'description')} maxLength={500} autosize minRows={1} />
        <TagsInput
          label="Permissions"
          description="Your product’s permissions, resource:action (e.g. document:write), or * for all. Press Enter after each."
          value={permissions}
          onChange={setPermissions}
          error={permErr}
          splitChars={[',', ' ']}
          clearable
        />
        <ProblemAlert error={unclaimed(save.error, [...roleFields, ...permKeys])} />
        <Group>
          <GatedButton op={op} type="submit" loading={save.isPending}>
            {role ? 'Save role' : 'Create role'}
          </GatedButton>
          {role && (
            <Button variant="default" onClick={onDone}>
              Cancel
            </Button>
          )}
        </Group>
      </Stack>
    </form>
  );
}
