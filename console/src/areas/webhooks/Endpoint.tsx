import { useState } from 'react';
import { Anchor, Button, Group, Stack, Text, Title } from '@mantine/core';
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { api, toProblem, unwrap } from '../../api/client';
import { useProjectId } from '../../lib/org';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { ConfirmButton } from '../../components/ConfirmButton';
import { CopyOnce } from '../../components/CopyOnce';
import { unclaimed } from '../../components/forms';
import { EndpointFieldsForm, fields, useEndpointFields, type Endpoint } from './EndpointForm';
import { endpointState } from './Endpoints';
import { when } from '../usage/format';

export function EndpointPage() {
  const projectId = useProjectId()!;
  const endpointId = useParams().endpointId!;
  const q = useQuery({
    queryKey: ['projects', projectId, 'webhook-endpoints', endpointId],
    queryFn: () =>
      unwrap(api.GET('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}', { params: { path: { projectId, endpointId } } })).then(
        (r) => r.data,
      ),
  });
  return (
    <Stack>
      <Anchor component={Link} to=".." relative="path" size="sm">
        ← Webhooks
      </Anchor>
      <Title order={1}>Webhook endpoint</Title>
      <QueryView query={q}>
        {(e) => (
          <Stack gap="lg">
            <Group gap="xs" wrap="wrap">
              <Text fw={700} style={{ wordBreak: 'break-all' }}>{e.url}</Text>
              {endpointState(e)}
            </Group>
            {e.previousSecretExpiresAt && <Text size="sm">The previous secret also signs until {when(e.previousSecretExpiresAt)}.</Text>}
            <Actions projectId={projectId} e={e} />
            <Edit projectId={projectId} e={e} key={e.updatedAt} />
            <Deliveries projectId={projectId} endpointId={e.id} disabled={!!e.disabledAt} />
          </Stack>
        )}
      </QueryView>
    </Stack>
  );
}

function Actions({ projectId, e }: { projectId: string; e: Endpoint }) {
  const qc = useQueryClient();
  const path = { projectId, endpointId: e.id };
  const [secret, setSecret] = useState<string | null>(null);
  const [tested, setTested] = useState<string | null>(null);
  const refresh = () => qc.invalidateQueries({ queryKey: ['projects', projectId, 'webhook-endpoints'] });
  const test = useMutation({
    mutationFn: () => unwrap(api.POST('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}/test', { params: { path } })),
    onSuccess: (r) => {
      setTested(`Test event ${r.data.eventId} queued; its delivery shows below.`);
      setTimeout(refresh, 1000);
    },
  });
  return (
    <Stack gap="xs">
      <Group gap="xs" wrap="wrap">
        <GatedButton op="testWebhookEndpoint" variant="default" onClick={() => test.mutate()} loading={test.isPending}>
          Send test event
        </GatedButton>
        {e.disabledAt ? (
          <ConfirmButton
            key="enable"
            op="enableWebhookEndpoint"
            color="indigo"
            title="Enable endpoint"
            message="Events are sent to this endpoint again."
            confirmLabel="Enable"
            onConfirm={() => unwrap(api.POST('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}/enable', { params: { path } })).then(refresh)}
          >
            Enable
          </ConfirmButton>
        ) : (
          <ConfirmButton
            key="disable"
            op="disableWebhookEndpoint"
            title="Disable endpoint"
            message="No event is sent to this endpoint until it is enabled again."
            confirmLabel="Disable"
            onConfirm={() => unwrap(api.POST('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}/disable', { params: { path } })).then(refresh)}
          >
            Disable
          </ConfirmButton>
        )}
        <ConfirmButton
          op="rotateWebhookEndpointSecret"
          title="Rotate signing secret"
          message="A new secret is drawn and shown once. For 24 hours the current one keeps signing too, so the receiver can switch."
          confirmLabel="Rotate secret"
          onConfirm={() =>
            unwrap(api.POST('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}/rotate-secret', { params: { path } })).then((r) => {
              setSecret(r.data.secret);
              refresh();
            })
          }
        >
          Rotate secret
        </ConfirmButton>
      </Group>
      {tested && <Text size="sm" role="status">{tested}</Text>}
      <ProblemAlert error={test.error} />
      {secret && <CopyOnce label="New signing secret" value={secret} />}
    </Stack>
  );
}

function Edit({ projectId, e }: { projectId: string; e: Endpoint }) {
  const qc = useQueryClient();
  const [v, setV] = useEndpointFields(e);
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}', {
          params: { path: { projectId, endpointId: e.id } },
          body: { url: v.url, description: v.description, eventTypes: v.eventTypes, environmentId: v.environmentId || null },
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['projects', projectId, 'webhook-endpoints'] }),
  });
  return (
    <form
      onSubmit={(ev) => {
        ev.preventDefault();
        save.mutate();
      }}
    >
      <Stack gap="xs" maw={640}>
        <Title order={2} size="h3">Edit</Title>
        <EndpointFieldsForm projectId={projectId} value={v} onChange={setV} error={save.error} idPrefix="edit-endpoint" />
        <ProblemAlert error={unclaimed(save.error, fields)} />
        {save.isSuccess && <Text size="sm" role="status">Saved.</Text>}
        <GatedButton op="updateWebhookEndpoint" type="submit" loading={save.isPending} w="fit-content">
          Save endpoint
        </GatedButton>
      </Stack>
    </form>
  );
}

function Deliveries({ projectId, endpointId, disabled }: { projectId: string; endpointId: string; disabled: boolean }) {
  const qc = useQueryClient();
  const key = ['projects', projectId, 'webhook-endpoints', endpointId, 'deliveries'];
  // Cursor-paged: each page answers x-next-cursor when older attempts follow.
  const q = useInfiniteQuery({
    queryKey: key,
    initialPageParam: undefined as string | undefined,
    queryFn: async ({ pageParam }) => {
      const r = await api.GET('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}/deliveries', {
        params: { path: { projectId, endpointId }, query: { limit: 50, cursor: pageParam } },
      });
      if (!r.response.ok) throw toProblem(r.error, r.response);
      return { rows: r.data!.data, next: r.response.headers.get('x-next-cursor') ?? undefined };
    },
    getNextPageParam: (last) => last.next,
  });
  const rows = q.data?.pages.flatMap((p) => p.rows) ?? [];
  return (
    <Stack gap="xs">
      <Group justify="space-between" wrap="wrap">
        <Title order={2} size="h3">Deliveries</Title>
        <Button variant="default" size="xs" onClick={() => q.refetch()} loading={q.isRefetching}>
          Refresh deliveries
        </Button>
      </Group>
      <QueryView query={q} empty="No deliveries yet: send a test event." isEmpty={() => rows.length === 0}>
        {() => (
          <>
            <DataTable
              caption="Delivery attempts, newest first"
              rows={rows}
              rowKey={(d) => d.id}
              initialSort={{ key: 'created', dir: 'desc' }}
              columns={[
                { key: 'created', header: 'Time', sortValue: (d) => d.createdAt, render: (d) => when(d.createdAt) },
                { key: 'type', header: 'Event', sortValue: (d) => d.eventType, render: (d) => d.eventType },
                { key: 'status', header: 'Status', sortValue: (d) => d.status, render: (d) => d.status },
                { key: 'code', header: 'Response', sortValue: (d) => d.responseCode ?? 0, render: (d) => d.responseCode ?? '—' },
                { key: 'attempt', header: 'Attempt', sortValue: (d) => d.attempt, render: (d) => d.attempt },
                { key: 'next', header: 'Next attempt', render: (d) => when(d.nextAttemptAt) },
                {
                  key: 'actions',
                  header: 'Actions',
                  render: (d) => (
                    <ConfirmButton
                      op="redeliverWebhookDelivery"
                      color="indigo"
                      size="xs"
                      disabled={disabled}
                      title="Redeliver"
                      message={disabled ? 'The endpoint is disabled: enable it first.' : `Event ${d.eventId} is queued to this endpoint again, with a fresh retry schedule.`}
                      confirmLabel="Redeliver"
                      aria-label={`Redeliver ${d.eventType} ${d.id}`}
                      onConfirm={() =>
                        unwrap(
                          api.POST('/api/v1/projects/{projectId}/webhook-endpoints/{endpointId}/deliveries/{deliveryId}/redeliver', {
                            params: { path: { projectId, endpointId, deliveryId: d.id } },
                          }),
                        ).then(() => setTimeout(() => qc.invalidateQueries({ queryKey: key }), 1000))
                      }
                    >
                      Redeliver
                    </ConfirmButton>
                  ),
                },
              ]}
            />
            {q.hasNextPage && (
              <Button variant="default" w="fit-content" onClick={() => q.fetchNextPage()} loading={q.isFetchingNextPage}>
                Load older deliveries
              </Button>
            )}
          </>
        )}
      </QueryView>
    </Stack>
  );
}
