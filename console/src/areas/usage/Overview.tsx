import { useState } from 'react';
import { Card, Group, Pagination, Paper, Select, SegmentedControl, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core';
import { AreaChart } from '@mantine/charts';
import { useDebouncedValue } from '@mantine/hooks';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useProjectId } from '../../lib/org';
import { EnvironmentSelect } from '../../lib/projectEnvironments';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { fieldError } from '../../components/forms';
import { ProblemAlert } from '../../components/ProblemAlert';
import { num, revenue, when } from './format';

export const periods = ['7', '14', '30', '90'];

/** Overview: the project's analytics; the environment and period apply to every part. */
export function Overview() {
  const projectId = useProjectId()!;
  const [env, setEnv] = useState('');
  const [days, setDays] = useState('30');
  const environmentId = env || undefined;
  return (
    <Stack>
      <Title order={1}>Usage analytics</Title>
      <Group align="flex-end" wrap="wrap">
        <EnvironmentSelect projectId={projectId} value={env} onChange={setEnv} allLabel="All environments" />
        <Stack gap={4}>
          <Text size="sm" fw={500} id="period-label">
            Period (days)
          </Text>
          <SegmentedControl value={days} onChange={setDays} data={periods} aria-labelledby="period-label" />
        </Stack>
      </Group>
      <Summary projectId={projectId} environmentId={environmentId} />
      <Activity projectId={projectId} environmentId={environmentId} days={Number(days)} />
      <Directory projectId={projectId} environmentId={environmentId} days={Number(days)} />
    </Stack>
  );
}

function Figure({ label, value }: { label: string; value: string }) {
  return (
    <Card withBorder padding="sm">
      <Text size="sm" c="dimmed">
        {label}
      </Text>
      <Text fw={700} size="xl" data-testid={`figure-${label}`}>
        {value}
      </Text>
    </Card>
  );
}

function Summary({ projectId, environmentId }: { projectId: string; environmentId?: string }) {
  const q = useQuery({
    queryKey: ['projects', projectId, 'analytics', 'summary', environmentId ?? ''],
    queryFn: () =>
      unwrap(api.GET('/api/v1/projects/{projectId}/analytics/summary', { params: { path: { projectId }, query: { environmentId } } })).then(
        (r) => r.data,
      ),
  });
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">
        Summary
      </Title>
      <QueryView query={q}>
        {(s) => (
          <Stack gap="xs">
            <SimpleGrid cols={{ base: 2, sm: 4 }}>
              <Figure label="Active today" value={num(s.activeSubjects.today)} />
              <Figure label="Active, 7 days" value={num(s.activeSubjects.last7Days)} />
              <Figure label="Active, 30 days" value={num(s.activeSubjects.last30Days)} />
              <Figure label="Revenue, 30 days" value={revenue(s.revenue)} />
            </SimpleGrid>
            <Text size="sm" c="dimmed">
              Meters from {s.from} to {s.to} (UTC)
            </Text>
            {s.meters.length === 0 ? (
              <Text size="sm">No usage recorded in the last 30 days.</Text>
            ) : (
              <DataTable
                caption="Usage by meter, last 30 days"
                rows={s.meters}
                rowKey={(m) => m.meter}
                initialSort={{ key: 'events', dir: 'desc' }}
                columns={[
                  { key: 'meter', header: 'Meter', sortValue: (m) => m.meter, render: (m) => m.meter },
                  { key: 'events', header: 'Events', sortValue: (m) => m.events, render: (m) => num(m.events) },
                  { key: 'quantity', header: 'Quantity', sortValue: (m) => m.quantity, render: (m) => num(m.quantity) },
                ]}
              />
            )}
          </Stack>
        )}
      </QueryView>
    </Stack>
  );
}

function Activity({ projectId, environmentId, days }: { projectId: string; environmentId?: string; days: number }) {
  const q = useQuery({
    queryKey: ['projects', projectId, 'analytics', 'activity', environmentId ?? '', days],
    placeholderData: keepPreviousData,
    queryFn: () =>
      unwrap(
        api.GET('/api/v1/projects/{projectId}/analytics/activity', { params: { path: { projectId }, query: { environmentId, days } } }),
      ).then((r) => r.data),
  });
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">
        Activity
      </Title>
      <QueryView query={q}>
        {(points) => <ActivityChart points={points} days={days} />}
      </QueryView>
    </Stack>
  );
}

export function ActivityChart({
  points,
  days,
  label = 'Activity',
}: {
  points: { day: string; events: number; quantity: number; activeSubjects?: number }[];
  days: number;
  label?: string;
}) {
  const events = points.reduce((n, p) => n + p.events, 0);
  const quantity = points.reduce((n, p) => n + p.quantity, 0);
  const hasSubjects = points.some((p) => p.activeSubjects !== undefined);
  const peak = Math.max(0, ...points.map((p) => p.activeSubjects ?? 0));
  const summary = `${num(events)} events, quantity ${num(quantity)} in the last ${days} days${hasSubjects ? `; at most ${num(peak)} active subjects a day` : ''}.`;
  return (
    <Paper withBorder p="sm" component="figure" m={0} aria-label={`${label} chart`}>
      <Text size="sm" component="figcaption" mb="xs" data-testid="chart-summary">
        {summary}
      </Text>
      {events === 0 ? (
        <Text size="sm" c="dimmed" data-testid="empty">
          No events in this period.
        </Text>
      ) : (
        <div aria-hidden="true">
          <AreaChart
            h={240}
            data={points}
            dataKey="day"
            withLegend
            curveType="linear"
            areaChartProps={{ accessibilityLayer: false }}
            series={[
              { name: 'events', label: 'Events', color: 'indigo.8' },
              ...(hasSubjects ? [{ name: 'activeSubjects', label: 'Active subjects', color: 'teal.8' }] : []),
            ]}
          />
        </div>
      )}
    </Paper>
  );
}

const sorts = [
  { value: '-lastSeen', label: 'Last seen, newest first' },
  { value: 'lastSeen', label: 'Last seen, oldest first' },
  { value: '-events', label: 'Most events' },
  { value: 'events', label: 'Fewest events' },
  { value: '-quantity', label: 'Most quantity' },
  { value: '-revenue', label: 'Most revenue' },
  { value: 'subjectId', label: 'Subject id, A to Z' },
  { value: '-subjectId', label: 'Subject id, Z to A' },
] as const;
type Sort = (typeof sorts)[number]['value'];
const pageSize = 20;

function Directory({ projectId, environmentId, days }: { projectId: string; environmentId?: string; days: number }) {
  const [search, setSearch] = useState('');
  const [q] = useDebouncedValue(search.trim(), 300);
  const [sort, setSort] = useState<Sort>('-lastSeen');
  const [page, setPage] = useState(1);
  const offset = (page - 1) * pageSize;
  const dir = useQuery({
    queryKey: ['projects', projectId, 'analytics', 'subjects', environmentId ?? '', days, q, sort, offset],
    placeholderData: keepPreviousData,
    queryFn: () =>
      unwrap(
        api.GET('/api/v1/projects/{projectId}/analytics/subjects', {
          params: { path: { projectId }, query: { environmentId, days, q: q || undefined, sort, limit: pageSize, offset } },
        }),
      ).then((r) => r.data),
  });
  const pages = Math.max(1, Math.ceil((dir.data?.total ?? 0) / pageSize));
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">
        Subjects
      </Title>
      <Group align="flex-end" wrap="wrap">
        <TextInput
          label="Search subject ids"
          value={search}
          onChange={(e) => {
            setSearch(e.currentTarget.value);
            setPage(1);
          }}
          error={fieldError(dir.error, 'query.q')}
          w={{ base: '100%', xs: 260 }}
        />
        <Select
          label="Sort"
          data={sorts.map((s) => ({ value: s.value, label: s.label }))}
          value={sort}
          onChange={(v) => {
            setSort((v ?? '-lastSeen') as Sort);
            setPage(1);
          }}
          allowDeselect={false}
          w={{ base: '100%', xs: 240 }}
          comboboxProps={{ withinPortal: true }}
        />
      </Group>
      {dir.isError && dir.data && <ProblemAlert error={dir.error} />}
      <QueryView query={dir} empty={q ? `No subject id contains “${q}”.` : `No subject seen in the last ${days} days.`} isEmpty={(d) => d.subjects.length === 0}>
        {(d) => (
          <>
            <DataTable
              caption={`Subjects, ${d.total} in all`}
              rows={d.subjects}
              rowKey={(s) => s.subjectId}
              pageSize={pageSize}
              columns={[
                {
                  key: 'subject',
                  header: 'Subject',
                  render: (s) => <Link to={`subjects/${encodeURIComponent(s.subjectId)}`}>{s.subjectId}</Link>,
                },
                { key: 'events', header: 'Events', render: (s) => num(s.events) },
                { key: 'quantity', header: 'Quantity', render: (s) => num(s.quantity) },
                { key: 'revenue', header: 'Revenue', render: (s) => revenue(s.revenue) },
                { key: 'first', header: 'First seen', render: (s) => when(s.firstSeen) },
                { key: 'last', header: 'Last seen', render: (s) => when(s.lastSeen) },
              ]}
            />
            <Group justify="space-between" wrap="wrap">
              <Text size="sm" c="dimmed" data-testid="subject-total">
                {d.total} subjects
              </Text>
              {pages > 1 && <Pagination total={pages} value={page} onChange={setPage} size="sm" aria-label="Subject pages" />}
            </Group>
          </>
        )}
      </QueryView>
    </Stack>
  );
}
