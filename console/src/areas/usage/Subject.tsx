// A subject's page: lifetime totals, billing state, its daily series, meters and recent
// events, its entitlements and grants (create one), and deletion with the 403 rule explained.
import { useState } from 'react';
import {
  Anchor, Badge, Card, Group, NumberInput, SegmentedControl, SimpleGrid, Stack, Switch, Text, TextInput, Textarea, Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useProjectId } from '../../lib/org';
import { EnvironmentSelect, useEnvironmentName } from '../../lib/projectEnvironments';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { ConfirmButton } from '../../components/ConfirmButton';
import { fieldError, unclaimed } from '../../components/forms';
import { ActivityChart, periods } from './Overview';
import { num, revenue, when } from './format';

export function SubjectPage() {
  const projectId = useProjectId()!;
  const subjectId = useParams().subjectId!;
  const [env, setEnv] = useState('');
  const [days, setDays] = useState('30');
  const environmentId = env || undefined;
  const envName = useEnvironmentName(projectId);
  const q = useQuery({
    queryKey: ['projects', projectId, 'analytics', 'subject', subjectId, environmentId ?? '', days],
    queryFn: () =>
      unwrap(
        api.GET('/api/v1/projects/{projectId}/subjects/{subjectId}/activity', {
          params: { path: { projectId, subjectId }, query: { environmentId, days: Number(days) } },
        }),
      ).then((r) => r.data),
  });
  return (
    <Stack>
      <Anchor component={Link} to="../.." relative="path" size="sm">
        ← Usage analytics
      </Anchor>
      <Title order={1} style={{ wordBreak: 'break-all' }}>
        Subject {subjectId}
      </Title>
      <Group align="flex-end" wrap="wrap">
        <EnvironmentSelect projectId={projectId} value={env} onChange={setEnv} allLabel="All environments" />
        <Stack gap={4}>
          <Text size="sm" fw={500} id="subject-period-label">
            Period (days)
          </Text>
          <SegmentedControl value={days} onChange={setDays} data={periods} aria-labelledby="subject-period-label" />
        </Stack>
      </Group>
      <QueryView query={q}>
        {(s) => (
          <Stack>
            <SimpleGrid cols={{ base: 2, sm: 4 }}>
              <Card withBorder padding="sm">
                <Text size="sm" c="dimmed">Lifetime events</Text>
                <Text fw={700} size="xl">{num(s.events)}</Text>
              </Card>
              <Card withBorder padding="sm">
                <Text size="sm" c="dimmed">Lifetime quantity</Text>
                <Text fw={700} size="xl">{num(s.quantity)}</Text>
              </Card>
              <Card withBorder padding="sm">
                <Text size="sm" c="dimmed">Revenue</Text>
                <Text fw={700} size="xl">{revenue(s.revenue)}</Text>
              </Card>
              <Card withBorder padding="sm">
                <Text size="sm" c="dimmed">Billing</Text>
                <Text fw={700} size="xl" data-testid="billing-status">{s.billing.status}</Text>
                {s.billing.plan && <Text size="sm">Plan {s.billing.plan}, {envName(s.billing.environmentId)}</Text>}
                {s.billing.currentPeriodEnd && <Text size="sm">Period ends {when(s.billing.currentPeriodEnd)}</Text>}
              </Card>
            </SimpleGrid>
            <Text size="sm">First seen {when(s.firstSeen)} · last seen {when(s.lastSeen)}</Text>
            <Title order={2} size="h3">Series</Title>
            <ActivityChart points={s.series} days={Number(days)} label="Subject activity" />
            <Title order={2} size="h3">Meters</Title>
            <DataTable
              caption={`Meters over the last ${days} days`}
              rows={s.meters}
              rowKey={(m) => m.meter}
              initialSort={{ key: 'events', dir: 'desc' }}
              columns={[
                { key: 'meter', header: 'Meter', sortValue: (m) => m.meter, render: (m) => m.meter },
                { key: 'events', header: 'Events', sortValue: (m) => m.events, render: (m) => num(m.events) },
                { key: 'quantity', header: 'Quantity', sortValue: (m) => m.quantity, render: (m) => num(m.quantity) },
              ]}
            />
            <Title order={2} size="h3">Recent events</Title>
            <DataTable
              caption="The 50 most recent events"
              rows={s.recentEvents}
              rowKey={(e) => e.id}
              pageSize={10}
              initialSort={{ key: 'timestamp', dir: 'desc' }}
              columns={[
                { key: 'timestamp', header: 'Time', sortValue: (e) => e.timestamp, render: (e) => when(e.timestamp) },
                { key: 'meter', header: 'Meter', sortValue: (e) => e.meter, render: (e) => e.meter },
                { key: 'quantity', header: 'Quantity', sortValue: (e) => e.quantity, render: (e) => num(e.quantity) },
                { key: 'env', header: 'Environment', sortValue: (e) => envName(e.environmentId), render: (e) => envName(e.environmentId) },
                { key: 'eventId', header: 'Event id', sortValue: (e) => e.eventId, render: (e) => e.eventId },
              ]}
            />
          </Stack>
        )}
      </QueryView>
      <Entitlements projectId={projectId} subjectId={subjectId} environmentId={environmentId} />
      <DeleteSubject projectId={projectId} subjectId={subjectId} />
    </Stack>
  );
}

function Entitlements({ projectId, subjectId, environmentId }: { projectId: string; subjectId: string; environmentId?: string }) {
  const q = useQuery({
    queryKey: ['projects', projectId, 'entitlements', subjectId, environmentId ?? ''],
    queryFn: () =>
      unwrap(
        api.GET('/api/v1/projects/{projectId}/subjects/{subjectId}/entitlements', {
          params: { path: { projectId, subjectId }, query: { environmentId } },
        }),
      ).then((r) => r.data),
  });
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">Entitlements</Title>
      <QueryView query={q} empty="No entitlements: no active subscription and no grant." isEmpty={(d) => d.entitlements.length === 0}>
        {(d) => (
          <DataTable
            caption="Entitlements by source"
            rows={d.entitlements}
            rowKey={(e) => `${e.featureKey}/${e.source.type}/${e.source.id}`}
            initialSort={{ key: 'feature', dir: 'asc' }}
            columns={[
              { key: 'feature', header: 'Feature', sortValue: (e) => e.featureKey, render: (e) => e.featureKey },
              { key: 'value', header: 'Value', render: (e) => String(e.value) },
              {
                key: 'source',
                header: 'Source',
                sortValue: (e) => e.source.type,
                render: (e) => <Badge variant="light">{e.source.type === 'plan' ? `plan ${e.source.id}` : `grant ${e.source.id}`}</Badge>,
              },
              { key: 'expires', header: 'Expires', render: (e) => (e.expiresAt ? when(e.expiresAt) : 'never') },
            ]}
          />
        )}
      </QueryView>
      <CreateGrant projectId={projectId} subjectId={subjectId} />
    </Stack>
  );
}

function CreateGrant({ projectId, subjectId }: { projectId: string; subjectId: string }) {
  const qc = useQueryClient();
  const [featureKey, setFeatureKey] = useState('');
  const [kind, setKind] = useState<'switch' | 'limit'>('switch');
  const [on, setOn] = useState(true);
  const [limit, setLimit] = useState<number | string>(10);
  const [expires, setExpires] = useState('');
  const [reason, setReason] = useState('');
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/v1/projects/{projectId}/subjects/{subjectId}/entitlement-grants', {
          params: { path: { projectId, subjectId } },
          body: {
            featureKey,
            value: kind === 'switch' ? on : Number(limit),
            ...(expires ? { expiresAt: new Date(expires).toISOString() } : {}),
            ...(reason ? { reason } : {}),
          },
        }),
      ),
    onSuccess: () => {
      setFeatureKey('');
      setReason('');
      qc.invalidateQueries({ queryKey: ['projects', projectId, 'entitlements', subjectId] });
    },
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <Stack gap="xs" maw={560}>
        <Title order={3} size="h4">Grant a feature</Title>
        <Group align="flex-start" wrap="wrap">
          <TextInput
            label="Feature key"
            description="a-z 0-9 _ . : -"
            value={featureKey}
            onChange={(e) => setFeatureKey(e.currentTarget.value)}
            error={fieldError(create.error, 'featureKey')}
            required
          />
          <Stack gap={4}>
            <Text size="sm" fw={500} id="grant-kind">Value</Text>
            <SegmentedControl
              value={kind}
              onChange={(v) => setKind(v as 'switch' | 'limit')}
              aria-labelledby="grant-kind"
              data={[
                { value: 'switch', label: 'Switch' },
                { value: 'limit', label: 'Limit' },
              ]}
            />
          </Stack>
          {kind === 'switch' ? (
            <Switch mt={28} label="Enabled" checked={on} onChange={(e) => setOn(e.currentTarget.checked)} error={fieldError(create.error, 'value')} />
          ) : (
            <NumberInput label="Limit" min={0} value={limit} onChange={setLimit} error={fieldError(create.error, 'value')} />
          )}
        </Group>
        <Group align="flex-start" wrap="wrap">
          <TextInput
            type="datetime-local"
            label="Expires (optional)"
            value={expires}
            onChange={(e) => setExpires(e.currentTarget.value)}
            error={fieldError(create.error, 'expiresAt')}
          />
        </Group>
        <Textarea label="Reason (optional)" value={reason} onChange={(e) => setReason(e.currentTarget.value)} error={fieldError(create.error, 'reason')} maxLength={500} />
        <ProblemAlert error={unclaimed(create.error, ['featureKey', 'value', 'expiresAt', 'reason'])} />
        <GatedButton op="createEntitlementGrant" type="submit" loading={create.isPending} w="fit-content">
          Create grant
        </GatedButton>
      </Stack>
    </form>
  );
}

function DeleteSubject({ projectId, subjectId }: { projectId: string; subjectId: string }) {
  const navigate = useNavigate();
  const qc = useQueryClient();
  const [done, setDone] = useState<string | null>(null);
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">Delete this subject</Title>
      <Text size="sm">
        Deleting removes the identity behind this subject id: its sessions, linked accounts, memberships, OAuth tokens and consents, and
        every role binding naming it, in every project. Usage, billing and audit records stay.
      </Text>
      <Text size="sm">
        The API allows it only when one of this project&apos;s OIDC clients holds a consent or an active refresh token from this user. Otherwise it
        answers 403, so that one project cannot delete an identity that other products share. An unknown or already deleted subject is 404.
      </Text>
      {done && <Text size="sm" role="status">{done}</Text>}
      <ConfirmButton
        op="deleteSubject"
        w="fit-content"
        title={`Delete subject ${subjectId}`}
        message="The identity, its sessions, tokens, consents and role bindings are deleted for good. This cannot be undone."
        confirmLabel="Delete subject"
        onConfirm={() =>
          unwrap(api.DELETE('/api/v1/projects/{projectId}/subjects/{subjectId}', { params: { path: { projectId, subjectId } } })).then((r) => {
            setDone(`Deleted: ${r.data.roleBindings} role bindings, ${r.data.oauthTokens} OAuth tokens, ${r.data.consents} consents.`);
            qc.invalidateQueries({ queryKey: ['projects', projectId, 'analytics'] });
            setTimeout(() => navigate('../..', { relative: 'path' }), 1500);
          })
        }
      >
        Delete subject
      </ConfirmButton>
    </Stack>
  );
}
