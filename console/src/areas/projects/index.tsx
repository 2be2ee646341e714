// Projects (org scope): list active or archived, create, archive and restore. A project's
// page (environments, rename) is the project-scoped "overview" area.
import { useState } from 'react';
import { Group, SegmentedControl, Stack, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useCan, useOrgId } from '../../lib/org';
import { when } from '../../lib/format';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { ConfirmButton } from '../../components/ConfirmButton';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, unclaimed } from '../../components/forms';

type State = 'active' | 'archived';

export function useProjects(orgId: string, state: State) {
  return useQuery({
    queryKey: ['organizations', orgId, 'projects', state],
    queryFn: () =>
      unwrap(api.GET('/api/v1/organizations/{organizationId}/projects', { params: { path: { organizationId: orgId }, query: { state } } })).then(
        (r) => r.data,
      ),
  });
}

export default function Projects() {
  const orgId = useOrgId()!;
  const [state, setState] = useState<State>('active');
  const projects = useProjects(orgId, state);
  const qc = useQueryClient();
  const refresh = () => qc.invalidateQueries({ queryKey: ['organizations', orgId, 'projects'] });
  const archive = (id: string) => unwrap(api.DELETE('/api/v1/projects/{projectId}', { params: { path: { projectId: id } } })).then(refresh);
  const restore = (id: string) => unwrap(api.POST('/api/v1/projects/{projectId}/restore', { params: { path: { projectId: id } } })).then(refresh);
  return (
    <Stack>
      <Title order={1}>Projects</Title>
      <CreateProject orgId={orgId} />
      <SegmentedControl
        w="fit-content"
        value={state}
        onChange={(v) => setState(v as State)}
        data={[
          { value: 'active', label: 'Active' },
          { value: 'archived', label: 'Archived' },
        ]}
        aria-label="Show projects"
      />
      <QueryView query={projects} empty={state === 'active' ? 'No projects yet. Create the first one above.' : 'No archived projects.'}>
        {(rows) => (
          <DataTable
            caption="Projects"
            rows={rows}
            rowKey={(p) => p.id}
            initialSort={{ key: 'name', dir: 'asc' }}
            columns={[
              {
                key: 'name',
                header: 'Name',
                sortValue: (p) => p.name.toLowerCase(),
                render: (p) => (state === 'active' ? <Link to={`/orgs/${orgId}/projects/${p.id}/overview`}>{p.name}</Link> : p.name),
              },
              { key: 'slug', header: 'Slug', sortValue: (p) => p.slug, render: (p) => p.slug },
              { key: 'created', header: 'Created', sortValue: (p) => p.createdAt, render: (p) => when(p.createdAt) },
              {
                key: 'actions',
                header: 'Actions',
                render: (p) =>
                  state === 'active' ? (
                    <ConfirmButton
                      op="archiveProject"
                      size="xs"
                      title={`Archive ${p.name}`}
                      message="The project and everything in it answer 404 until restored. Its keys stop working. Nothing is deleted."
                      confirmLabel="Archive project"
                      onConfirm={() => archive(p.id)}
                    >
                      Archive
                    </ConfirmButton>
                  ) : (
                    <ConfirmButton
                      op="restoreProject"
                      color="indigo"
                      size="xs"
                      title={`Restore ${p.name}`}
                      message="The project comes back with its environments, configuration and history."
                      confirmLabel="Restore project"
                      onConfirm={() => restore(p.id)}
                    >
                      Restore
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

function CreateProject({ orgId }: { orgId: string }) {
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const can = useCan()('createProject');
  const qc = useQueryClient();
  const navigate = useNavigate();
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/v1/organizations/{organizationId}/projects', {
          params: { path: { organizationId: orgId } },
          body: { name, ...(slug ? { slug } : {}) },
        }),
      ).then((r) => r.data),
    onSuccess: (p) => {
      qc.invalidateQueries({ queryKey: ['organizations', orgId, 'projects'] });
      navigate(`/orgs/${orgId}/projects/${p.id}/overview`);
    },
  });
  if (!can.allowed) return null;
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <Stack gap="xs" maw={520}>
        <Title order={2} size="h4">
          Create a project
        </Title>
        <Group align="flex-start" grow preventGrowOverflow={false} wrap="wrap">
          <TextInput label="Project name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(create.error, 'name')} required />
          <TextInput
            label="Project slug (optional)"
            value={slug}
            onChange={(e) => setSlug(e.currentTarget.value)}
            error={fieldError(create.error, 'slug')}
            description="Defaults to the name, slugified"
          />
        </Group>
        <ProblemAlert error={unclaimed(create.error, ['name', 'slug'])} />
        <GatedButton op="createProject" type="submit" loading={create.isPending} w="fit-content">
          Create project
        </GatedButton>
      </Stack>
    </form>
  );
}
