import { useState } from 'react';
import { Badge, Stack, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useProjectId } from '../../lib/org';
import { useEnvironmentName } from '../../lib/projectEnvironments';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { CopyOnce } from '../../components/CopyOnce';
import { unclaimed } from '../../components/forms';
import { EndpointFieldsForm, fields, useEndpointFields, type Endpoint } from './EndpointForm';
import { when } from '../usage/format';

export function endpointState(e: Endpoint) {
  if (!e.disabledAt) return <Badge variant="outline" color="teal.9">enabled</Badge>;
  return <Badge variant="outline" color={e.disabledReason === 'failing' ? 'red.9' : 'gray.8'}>disabled ({e.disabledReason})</Badge>;
}

export function Endpoints() {
  const projectId = useProjectId()!;
  const envName = useEnvironmentName(projectId);
  const q = useQuery({
    queryKey: ['projects', projectId, 'webhook-endpoints'],
    queryFn: () => unwrap(api.GET('/api/v1/projects/{projectId}/webhook-endpoints', { params: { path: { projectId } } })).then((r) => r.data),
  });
  return (
    <Stack>
      <Title order={1}>Webhooks</Title>
      <CreateEndpoint projectId={projectId} />
      <Title order={2} size="h3">Endpoints</Title>
      <QueryView query={q} empty="No webhook endpoints yet.">
        {(rows) => (
          <DataTable
            caption="Webhook endpoints"
            rows={rows}
            rowKey={(e) => e.id}
            initialSort={{ key: 'created', dir: 'asc' }}
            columns={[
              { key: 'url', header: 'URL', sortValue: (e) => e.url, render: (e) => <Link to={e.id}>{e.url}</Link> },
              { key: 'description', header: 'Description', sortValue: (e) => e.description, render: (e) => e.description || '—' },
              { key: 'env', header: 'Environment', sortValue: (e) => envName(e.environmentId), render: (e) => envName(e.environmentId) },
              { key: 'types', header: 'Events', render: (e) => e.eventTypes.join(', ') },
              { key: 'state', header: 'State', sortValue: (e) => (e.disabledAt ? 1 : 0), render: endpointState },
              { key: 'created', header: 'Created', sortValue: (e) => e.createdAt, render: (e) => when(e.createdAt) },
            ]}
          />
        )}
      </QueryView>
    </Stack>
  );
}

function CreateEndpoint({ projectId }: { projectId: string }) {
  const qc = useQueryClient();
  const [v, setV] = useEndpointFields();
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/v1/projects/{projectId}/webhook-endpoints', {
          params: { path: { projectId } },
          body: {
            url: v.url,
            eventTypes: v.eventTypes,
            ...(v.description ? { description: v.description } : {}),
            ...(v.environmentId ? { environmentId: v.environmentId } : {}),
          },
        }),
      ).then((r) => r.data),
    onSuccess: () => {
      setV({ url: '', description: '', environmentId: '', eventTypes: ['*'] });
      qc.invalidateQueries({ queryKey: ['projects', projectId, 'webhook-endpoints'] });
    },
  });
  const [created, setCreated] = useState<string | null>(null);
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        setCreated(null);
        create.mutate(undefined, { onSuccess: (d) => setCreated(d.secret) });
      }}
    >
      <Stack gap="xs" maw={640}>
        <Title order={2} size="h3">Add an endpoint</Title>
        <EndpointFieldsForm projectId={projectId} value={v} onChange={setV} error={create.error} idPrefix="new-endpoint" />
        <ProblemAlert error={unclaimed(create.error, fields)} />
        <GatedButton op="createWebhookEndpoint" type="submit" loading={create.isPending} w="fit-content">
          Add endpoint
        </GatedButton>
        {created && <CopyOnce label="Signing secret" value={created} />}
      </Stack>
    </form>
  );
}
