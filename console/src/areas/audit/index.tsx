// Audit log (org scope: the organization and its projects; project scope: that project),
// newest first, filtered by action, paged with the API's cursor (x-next-cursor → cursor).
import { useState } from 'react';
import { Button, Group, Stack, Text, TextInput, Title } from '@mantine/core';
import { useInfiniteQuery } from '@tanstack/react-query';
import { api, toProblem } from '../../api/client';
import type { components } from '../../api/schema.gen';
import { useOrgId, useProjectId } from '../../lib/org';
import { when } from '../../lib/format';
import { DataTable } from '../../components/DataTable';
import { Empty, Loading } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { fieldError } from '../../components/forms';

type Entry = components['schemas']['AuditLogEntry'];
type Page = { data: Entry[]; next: string | null };

async function page(orgId: string, projectId: string | undefined, action: string, cursor: string | undefined): Promise<Page> {
  const query = { ...(action ? { action } : {}), ...(cursor ? { cursor } : {}) };
  const { data, error, response } = projectId
    ? await api.GET('/api/v1/projects/{projectId}/audit-logs', { params: { path: { projectId }, query } })
    : await api.GET('/api/v1/organizations/{organizationId}/audit-logs', { params: { path: { organizationId: orgId }, query } });
  if (!response.ok || !data) throw toProblem(error, response);
  return { data: data.data, next: response.headers.get('x-next-cursor') };
}

export default function AuditLog() {
  const orgId = useOrgId()!;
  const projectId = useProjectId();
  const [draft, setDraft] = useState('');
  const [action, setAction] = useState('');
  const q = useInfiniteQuery({
    queryKey: projectId ? ['projects', projectId, 'audit-logs', action] : ['organizations', orgId, 'audit-logs', action],
    queryFn: ({ pageParam }) => page(orgId, projectId, action, pageParam),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.next ?? undefined,
  });
  const rows = q.data?.pages.flatMap((p) => p.data) ?? [];
  return (
    <Stack>
      <Title order={1}>{projectId ? 'Project audit log' : 'Audit log'}</Title>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setAction(draft.trim());
        }}
      >
        <Group align="flex-end" wrap="wrap">
          <TextInput
            label="Action"
            placeholder="config.reveal"
            value={draft}
            onChange={(e) => setDraft(e.currentTarget.value)}
            error={fieldError(q.error, 'query.action')}
          />
          <Button type="submit" variant="light">
            Filter
          </Button>
          {action && (
            <Button
              variant="subtle"
              onClick={() => {
                setDraft('');
                setAction('');
              }}
            >
              Clear
            </Button>
          )}
        </Group>
      </form>
      {q.isPending ? (
        <Loading />
      ) : q.isError && rows.length === 0 ? (
        <ProblemAlert error={q.error} />
      ) : rows.length === 0 ? (
        <Empty>{action ? `No entries for ${action}.` : 'Nothing has been recorded yet.'}</Empty>
      ) : (
        <>
          <DataTable
            caption="Audit log entries"
            rows={rows}
            rowKey={(e) => e.id}
            pageSize={50}
            columns={[
              { key: 'when', header: 'When', sortValue: (e) => e.occurredAt, render: (e) => <Text size="sm" style={{ whiteSpace: 'nowrap' }}>{when(e.occurredAt)}</Text> },
              { key: 'action', header: 'Action', sortValue: (e) => e.action, render: (e) => <Text size="sm" ff="monospace" style={{ whiteSpace: 'nowrap' }}>{e.action}</Text> },
              {
                key: 'actor',
                header: 'Actor',
                render: (e) => (
                  <Text size="xs" ff="monospace">
                    {e.actor.type}:{e.actor.id}
                  </Text>
                ),
              },
              {
                key: 'target',
                header: 'Target',
                render: (e) => (
                  <Text size="xs" ff="monospace">
                    {e.target.type}:{e.target.id}
                  </Text>
                ),
              },
              { key: 'ip', header: 'IP', render: (e) => e.ipAddress },
              { key: 'request', header: 'Request', render: (e) => <Text size="xs" ff="monospace">{e.requestId}</Text> },
            ]}
          />
          {q.isError && <ProblemAlert error={q.error} />}
          <Group>
            {q.hasNextPage ? (
              <Button variant="light" onClick={() => q.fetchNextPage()} loading={q.isFetchingNextPage}>
                Load older entries
              </Button>
            ) : (
              <Text size="sm" c="dimmed">
                {rows.length === 1 ? '1 entry' : `${rows.length} entries`}: the beginning of the log.
              </Text>
            )}
          </Group>
        </>
      )}
    </Stack>
  );
}
