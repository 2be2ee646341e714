import { useState } from 'react';
import { Badge, Button, Group, Modal, NumberInput, SegmentedControl, Select, Stack, Text, TextInput, Textarea, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import type { components } from '../../api/schema.gen';
import { useProjectEnvironments } from '../../lib/projectEnvironments';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { ConfirmButton } from '../../components/ConfirmButton';
import { fieldErrors } from '../../components/forms';
import { money } from '../usage/format';

type Plan = components['schemas']['BillingPlan'];
type Interval = Plan['interval'];
type EntitlementMap = components['schemas']['EntitlementMap'];

/** Plans: the project's plans by state, with create, edit, archive and restore. */
export function Plans({ projectId }: { projectId: string }) {
  const [state, setState] = useState<'active' | 'archived' | 'all'>('active');
  const [editing, setEditing] = useState<Plan | null>(null);
  const qc = useQueryClient();
  const key = ['projects', projectId, 'billing', 'plans'];
  const q = useQuery({
    queryKey: [...key, state],
    queryFn: () =>
      unwrap(api.GET('/api/v1/projects/{projectId}/billing/plans', { params: { path: { projectId }, query: { state } } })).then((r) => r.data),
  });
  const act = (planId: string, what: 'archive' | 'restore') =>
    unwrap(
      what === 'archive'
        ? api.POST('/api/v1/projects/{projectId}/billing/plans/{planId}/archive', { params: { path: { projectId, planId } } })
        : api.POST('/api/v1/projects/{projectId}/billing/plans/{planId}/restore', { params: { path: { projectId, planId } } }),
    ).then(() => qc.invalidateQueries({ queryKey: key }));
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">Plans</Title>
      <PlanForm projectId={projectId} />
      <SegmentedControl
        w="fit-content"
        value={state}
        onChange={(v) => setState(v as typeof state)}
        aria-label="Show plans"
        data={[
          { value: 'active', label: 'Active' },
          { value: 'archived', label: 'Archived' },
          { value: 'all', label: 'All' },
        ]}
      />
      <QueryView query={q} empty={state === 'archived' ? 'No archived plans.' : 'No plans yet: create one above.'}>
        {(plans) => (
          <DataTable
            caption="Billing plans"
            rows={plans}
            rowKey={(p) => p.id}
            initialSort={{ key: 'key', dir: 'asc' }}
            columns={[
              { key: 'key', header: 'Key', sortValue: (p) => p.key, render: (p) => p.key },
              { key: 'name', header: 'Name', sortValue: (p) => p.name.toLowerCase(), render: (p) => p.name },
              { key: 'price', header: 'Price', sortValue: (p) => p.amount, render: (p) => `${money(p.amount, p.currency)} / ${p.interval.replace('_', ' ')}` },
              {
                key: 'entitlements',
                header: 'Entitlements',
                render: (p) => Object.entries(p.entitlements).map(([k, v]) => `${k}=${v}`).join(', ') || '—',
              },
              {
                key: 'state',
                header: 'State',
                sortValue: (p) => (p.archived ? 1 : 0),
                render: (p) => <Badge variant="outline" color={p.archived ? 'gray.8' : 'teal.9'}>{p.archived ? 'archived' : 'active'}</Badge>,
              },
              {
                key: 'actions',
                header: 'Actions',
                render: (p) => (
                  <Group gap="xs" wrap="nowrap">
                    {!p.archived && (
                      <GatedButton op="updateBillingPlan" size="xs" variant="default" onClick={() => setEditing(p)} aria-label={`Edit ${p.key}`}>
                        Edit
                      </GatedButton>
                    )}
                    {p.archived ? (
                      <ConfirmButton
                        op="restoreBillingPlan"
                        color="indigo"
                        size="xs"
                        title={`Restore plan ${p.key}`}
                        message="The plan can be chosen at checkout again."
                        confirmLabel="Restore"
                        aria-label={`Restore ${p.key}`}
                        onConfirm={() => act(p.id, 'restore')}
                      >
                        Restore
                      </ConfirmButton>
                    ) : (
                      <ConfirmButton
                        op="archiveBillingPlan"
                        size="xs"
                        title={`Archive plan ${p.key}`}
                        message="New checkouts can no longer choose it. Subscribers keep it and its entitlements."
                        confirmLabel="Archive"
                        aria-label={`Archive ${p.key}`}
                        onConfirm={() => act(p.id, 'archive')}
                      >
                        Archive
                      </ConfirmButton>
                    )}
                  </Group>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <Modal opened={!!editing} onClose={() => setEditing(null)} title={editing ? `Edit plan ${editing.key}` : ''} size="lg">
        {editing && <PlanForm projectId={projectId} plan={editing} onDone={() => setEditing(null)} />}
      </Modal>
    </Stack>
  );
}

/** entitlementText writes a map as the editor's lines (feature=value). */
function entitlementText(m: EntitlementMap): string {
  return Object.entries(m)
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');
}

/** parseEntitlements reads "feature=true|false|number" lines; the API validates keys and values. */
export function parseEntitlements(text: string): EntitlementMap | string {
  const out: EntitlementMap = {};
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq < 1) return `Line ${i + 1}: write feature=true, feature=false or feature=<limit>.`;
    const k = line.slice(0, eq).trim();
    const v = line.slice(eq + 1).trim();
    if (v === 'true' || v === 'false') out[k] = v === 'true';
    else if (v !== '' && !Number.isNaN(Number(v))) out[k] = Number(v);
    else return `Line ${i + 1}: the value must be true, false or a number.`;
  }
  return out;
}

function PlanForm({ projectId, plan, onDone }: { projectId: string; plan?: Plan; onDone?: () => void }) {
  const qc = useQueryClient();
  const envs = useProjectEnvironments(projectId);
  const [key, setKey] = useState(plan?.key ?? '');
  const [name, setName] = useState(plan?.name ?? '');
  const [description, setDescription] = useState(plan?.description ?? '');
  const [amount, setAmount] = useState<number | string>(plan?.amount ?? 0);
  const [currency, setCurrency] = useState(plan?.currency ?? 'usd');
  const [interval, setInterval] = useState<Interval>(plan?.interval ?? 'month');
  const [prices, setPrices] = useState<Record<string, string>>(plan?.stripePriceIds ?? {});
  const [ents, setEnts] = useState(plan ? entitlementText(plan.entitlements) : '');
  const [localError, setLocalError] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: async () => {
      const entitlements = parseEntitlements(ents);
      if (typeof entitlements === 'string') {
        setLocalError(entitlements);
        throw new Error(entitlements);
      }
      setLocalError(null);
      const stripePriceIds = Object.fromEntries(Object.entries(prices).filter(([, v]) => v.trim() !== ''));
      const common = { name, amount: Number(amount), currency, interval, stripePriceIds, entitlements, ...(description ? { description } : {}) };
      return plan
        ? unwrap(api.PATCH('/api/v1/projects/{projectId}/billing/plans/{planId}', { params: { path: { projectId, planId: plan.id } }, body: common }))
        : unwrap(api.POST('/api/v1/projects/{projectId}/billing/plans', { params: { path: { projectId } }, body: { key, ...common } }));
    },
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: ['projects', projectId, 'billing', 'plans'] });
      if (!plan) {
        setKey('');
        setName('');
        setDescription('');
        setEnts('');
      }
      onDone?.();
    },
  });
  const fe = fieldErrors(save.error);
  const claimed = (k: string) => ['key', 'name', 'description', 'amount', 'currency', 'interval'].includes(k) || k.startsWith('stripePriceIds') || k.startsWith('entitlements');
  const entError = localError ?? Object.entries(fe).find(([k]) => k.startsWith('entitlements'))?.[1];
  const rest = Object.keys(fe).length > 0 && Object.keys(fe).every(claimed) ? null : localError ? null : save.error;
  const idp = plan ? `edit-${plan.id}` : 'new-plan';
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
      aria-label={plan ? `Edit plan ${plan.key}` : 'Create a plan'}
    >
      <Stack gap="xs" maw={640}>
        {!plan && <Title order={3} size="h4">Create a plan</Title>}
        <Group align="flex-start" wrap="wrap" grow preventGrowOverflow={false}>
          {!plan && (
            <TextInput id={`${idp}-key`} label="Key" description="lower-case slug, cannot change" value={key} onChange={(e) => setKey(e.currentTarget.value)} error={fe.key} required />
          )}
          <TextInput id={`${idp}-name`} label="Plan name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fe.name} required />
        </Group>
        <TextInput id={`${idp}-description`} label="Description (optional)" value={description} onChange={(e) => setDescription(e.currentTarget.value)} error={fe.description} />
        <Group align="flex-start" wrap="wrap" grow preventGrowOverflow={false}>
          <NumberInput id={`${idp}-amount`} label="Amount (minor units)" description="4900 = 49.00" min={0} allowDecimal={false} value={amount} onChange={setAmount} error={fe.amount} required />
          <TextInput id={`${idp}-currency`} label="Currency" description="ISO 4217, lower case" value={currency} onChange={(e) => setCurrency(e.currentTarget.value)} error={fe.currency} required maxLength={3} />
          <Select
            id={`${idp}-interval`}
            label="Interval"
            data={[
              { value: 'month', label: 'Monthly' },
              { value: 'year', label: 'Yearly' },
              { value: 'one_time', label: 'One time' },
            ]}
            value={interval}
            onChange={(v) => setInterval((v ?? 'month') as Interval)}
            allowDeselect={false}
            error={fe.interval}
            comboboxProps={{ withinPortal: true }}
          />
        </Group>
        <Text size="sm" fw={500}>Stripe price per environment (optional)</Text>
        <Group align="flex-start" wrap="wrap" grow preventGrowOverflow={false}>
          {(envs.data?.environments ?? []).map((e) => (
            <TextInput
              key={e.id}
              id={`${idp}-price-${e.name}`}
              label={`${e.name} price id`}
              placeholder="price_…"
              value={prices[e.id] ?? ''}
              onChange={(ev) => {
                const v = ev.currentTarget.value;
                setPrices((p) => ({ ...p, [e.id]: v }));
              }}
              error={fe[`stripePriceIds.${e.id}`]}
            />
          ))}
        </Group>
        <Textarea
          id={`${idp}-entitlements`}
          label="Entitlements"
          description="One per line: feature=true, feature=false or feature=<limit>"
          autosize
          minRows={2}
          value={ents}
          onChange={(e) => setEnts(e.currentTarget.value)}
          error={entError}
        />
        <ProblemAlert error={rest} />
        <GatedButton op={plan ? 'updateBillingPlan' : 'createBillingPlan'} type="submit" loading={save.isPending} w="fit-content">
          {plan ? 'Save plan' : 'Create plan'}
        </GatedButton>
        {plan && (
          <Button variant="default" onClick={onDone} w="fit-content">
            Cancel
          </Button>
        )}
      </Stack>
    </form>
  );
}
