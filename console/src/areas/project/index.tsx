// A project's overview (project scope): its name and slug (rename), and its environments,
// each linking to its configuration.
import { useState } from 'react';
import { Badge, Group, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useCan, useOrgId, useProjectId } from '../../lib/org';
import { when } from '../../lib/format';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, unclaimed } from '../../components/forms';

export function useProject(projectId: string) {
  return useQuery({
    queryKey: ['projects', projectId],
    queryFn: () => unwrap(api.GET('/api/v1/projects/{projectId}', { params: { path: { projectId } } })).then((r) => r.data),
  });
}

export default function ProjectOverview() {
  const orgId = useOrgId()!;
  const projectId = useProjectId()!;
  const project = useProject(projectId);
  return (
    <QueryView query={project}>
      {(p) => (
        <Stack>
          <Title order={1}>{p.name}</Title>
          <Text c="dimmed" size="sm">
            {p.slug} · {p.id} · created {when(p.createdAt)}
          </Text>
          <Title order={2} size="h4">
            Environments
          </Title>
          <DataTable
            caption="Environments"
            rows={p.environments}
            rowKey={(e) => e.id}
            columns={[
              { key: 'name', header: 'Environment', render: (e) => <Badge variant="light">{e.name}</Badge> },
              { key: 'id', header: 'ID', render: (e) => <Text size="sm" ff="monospace">{e.id}</Text> },
              {
                key: 'config',
                header: 'Configuration',
                render: (e) => (
                  <Link to={`/orgs/${orgId}/projects/${projectId}/config/${e.id}`} aria-label={`Configuration of ${e.name}`}>
                    Configuration
                  </Link>
                ),
              },
            ]}
          />
          <Rename projectId={projectId} name={p.name} slug={p.slug} />
        </Stack>
      )}
    </QueryView>
  );
}

function Rename({ projectId, name: current, slug: currentSlug }: { projectId: string; name: string; slug: string }) {
  const [name, setName] = useState(current);
  const [slug, setSlug] = useState(currentSlug);
  const can = useCan()('updateProject');
  const qc = useQueryClient();
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/api/v1/projects/{projectId}', {
          params: { path: { projectId } },
          body: { ...(name !== current ? { name } : {}), ...(slug !== currentSlug ? { slug } : {}) },
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['projects', projectId] }),
  });
  if (!can.allowed) return null;
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <Stack gap="xs" maw={520}>
        <Title order={2} size="h4">
          Rename
        </Title>
        <Group align="flex-start" grow preventGrowOverflow={false} wrap="wrap">
          <TextInput label="Project name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(save.error, 'name')} />
          <TextInput label="Project slug" value={slug} onChange={(e) => setSlug(e.currentTarget.value)} error={fieldError(save.error, 'slug')} />
        </Group>
        <ProblemAlert error={unclaimed(save.error, ['name', 'slug'])} />
        <GatedButton op="updateProject" type="submit" loading={save.isPending} disabled={name === current && slug === currentSlug} w="fit-content">
          Save
        </GatedButton>
      </Stack>
    </form>
  );
}
