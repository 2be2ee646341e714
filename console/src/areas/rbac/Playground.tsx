import { useState } from 'react';
import { Badge, Code, Group, Paper, SegmentedControl, Stack, Switch, Table, Text, TextInput, Textarea, Title } from '@mantine/core';
import { useMutation } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { useProjectId } from '../../lib/org';
import { ScrollRegion } from '../../components/ScrollRegion';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, fieldErrors, unclaimed } from '../../components/forms';
import { checkPermission, principalTypes, when, type Decision, type PrincipalType } from './lib';

/**
 * Playground: POST /api/v1/authorize with explain, as a product service would ask; a batch of
 * checks (POST /api/v1/authorize/batch); and the principal's effective permissions.
 */
export function Playground() {
  const [mode, setMode] = useState<'single' | 'batch'>('single');
  return (
    <Stack>
      <Title order={2} size="h3">
        Authorize playground
      </Title>
      <SegmentedControl
        w="fit-content"
        aria-label="Playground mode"
        value={mode}
        onChange={(v) => setMode(v as 'single' | 'batch')}
        data={[
          { value: 'single', label: 'One check' },
          { value: 'batch', label: 'Batch' },
        ]}
      />
      {mode === 'single' ? <Single /> : <Batch />}
    </Stack>
  );
}

const fields = ['principalType', 'principalId', 'permission'];

function Single() {
  const projectId = useProjectId()!;
  const [principalType, setPrincipalType] = useState<PrincipalType>('user');
  const [principalId, setPrincipalId] = useState('');
  const [permission, setPermission] = useState('');
  const [local, setLocal] = useState<Record<string, string>>({});
  const decide = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/authorize', { body: { projectId, principalType, principalId, permission, explain: true } })).then((r) => r.data),
  });
  const effective = useMutation({
    mutationFn: () =>
      unwrap(
        api.GET('/api/v1/projects/{projectId}/principals/{principalType}/{principalId}/permissions', {
          params: { path: { projectId, principalType, principalId } },
        }),
      ).then((r) => r.data),
  });
  const validate = (needPermission: boolean) => {
    const e: Record<string, string> = {};
    if (!principalId.trim()) e.principalId = 'Required';
    if (needPermission) {
      const bad = permission ? checkPermission(permission) : 'Required';
      if (bad) e.permission = bad;
    }
    setLocal(e);
    return Object.keys(e).length === 0;
  };
  return (
    <Stack>
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          if (validate(true)) decide.mutate();
        }}
      >
        <Stack gap="xs" maw={640}>
          <div>
            <Text size="sm" fw={500} id="playground-principal-type">
              Principal type
            </Text>
            <SegmentedControl aria-labelledby="playground-principal-type" value={principalType} onChange={(v) => setPrincipalType(v as PrincipalType)} data={principalTypes} />
          </div>
          <TextInput label="Principal id" required value={principalId} onChange={(e) => setPrincipalId(e.currentTarget.value)} error={local.principalId ?? fieldError(decide.error, 'principalId')} />
          <TextInput label="Permission" required placeholder="document:write" value={permission} onChange={(e) => setPermission(e.currentTarget.value)} error={local.permission ?? fieldError(decide.error, 'permission')} />
          <ProblemAlert error={unclaimed(decide.error, fields)} />
          <Group wrap="wrap">
            <GatedButton op="authorize" type="submit" loading={decide.isPending}>
              Decide
            </GatedButton>
            <GatedButton
              op="getPrincipalPermissions"
              variant="default"
              loading={effective.isPending}
              onClick={() => {
                if (validate(false)) effective.mutate();
              }}
            >
              Effective permissions
            </GatedButton>
          </Group>
        </Stack>
      </form>
      {decide.data && <DecisionView d={decide.data} />}
      <ProblemAlert error={effective.error} />
      {effective.data && (
        <Paper withBorder p="md" data-testid="effective">
          <Stack gap="xs">
            <Title order={3} size="h4">
              Effective permissions of {effective.data.principalType} {effective.data.principalId}
            </Title>
            {effective.data.wildcard && <Text size="sm">Holds *: every permission is granted, so the list is not exhaustive.</Text>}
            <Group gap={4}>
              {effective.data.permissions.length === 0 ? (
                <Text size="sm">No permission: no unexpired binding.</Text>
              ) : (
                effective.data.permissions.map((p) => (
                  <Badge key={p} variant="light" tt="none">
                    {p}
                  </Badge>
                ))
              )}
            </Group>
            {effective.data.roles.length > 0 && (
              <Text size="sm">Through roles: {effective.data.roles.map((r) => r.slug).join(', ')}</Text>
            )}
          </Stack>
        </Paper>
      )}
    </Stack>
  );
}

const reasons: Record<string, string> = {
  no_bindings: 'The principal has no binding in this project.',
  bindings_expired: 'At least one expired binding would have granted it.',
  permission_not_granted: 'Bindings exist, but no role of an unexpired binding holds the permission.',
};

/** DecisionView shows a decision: allowed or denied, roles, decisionId, and the explanation. */
export function DecisionView({ d }: { d: Decision }) {
  const x = d.explanation;
  return (
    <Paper withBorder p="md" data-testid="decision" aria-live="polite">
      <Stack gap="xs">
        <Group gap="sm" wrap="wrap">
          <Badge size="lg" color={d.allowed ? 'teal.9' : 'red.9'} data-testid="decision-result">
            {d.allowed ? 'Allowed' : 'Denied'}
          </Badge>
          <Text size="sm">
            Decision <Code>{d.decisionId}</Code>
          </Text>
        </Group>
        <Text size="sm">Roles considered: {d.roles.length ? d.roles.join(', ') : 'none'}</Text>
        {x?.grantedBy && x.grantedBy.length > 0 && (
          <>
            <Text size="sm" fw={600}>
              Granted by
            </Text>
            <ScrollRegion label="Granted by" minWidth={420}>
              <Table data-testid="granted-by">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Role</Table.Th>
                    <Table.Th>Matched</Table.Th>
                    <Table.Th>Binding</Table.Th>
                    <Table.Th>Expires</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {x.grantedBy.map((g) => (
                    <Table.Tr key={g.bindingId}>
                      <Table.Td>{g.roleSlug}</Table.Td>
                      <Table.Td>{g.matched}</Table.Td>
                      <Table.Td>{g.bindingId}</Table.Td>
                      <Table.Td>{when(g.expiresAt)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </ScrollRegion>
          </>
        )}
        {x?.reason && (
          <Text size="sm" data-testid="deny-reason">
            Reason: <Code>{x.reason}</Code> — {reasons[x.reason] ?? ''}
          </Text>
        )}
        {x?.considered && x.considered.length > 0 && (
          <>
            <Text size="sm" fw={600}>
              Bindings considered
            </Text>
            <ScrollRegion label="Bindings considered" minWidth={420}>
              <Table data-testid="considered">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Role</Table.Th>
                    <Table.Th>Binding</Table.Th>
                    <Table.Th>Expires</Table.Th>
                    <Table.Th>Expired</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {x.considered.map((c) => (
                    <Table.Tr key={c.bindingId}>
                      <Table.Td>{c.roleSlug}</Table.Td>
                      <Table.Td>{c.bindingId}</Table.Td>
                      <Table.Td>{when(c.expiresAt)}</Table.Td>
                      <Table.Td>{c.expired ? 'yes' : 'no'}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </ScrollRegion>
          </>
        )}
      </Stack>
    </Paper>
  );
}

/** Batch: one check a line, "user user-42 document:write" (type, id, permission). */
function Batch() {
  const projectId = useProjectId()!;
  const [text, setText] = useState('');
  const [explain, setExplain] = useState(true);
  const [local, setLocal] = useState<string>();
  const parse = () =>
    text
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .map((l) => {
        const [t, id, perm] = l.split(/\s+/);
        return { principalType: (t === 'sa' ? 'service_account' : t) as PrincipalType, principalId: id ?? '', permission: perm ?? '' };
      });
  const run = useMutation({
    mutationFn: (checks: ReturnType<typeof parse>) =>
      unwrap(api.POST('/api/v1/authorize/batch', { body: { projectId, checks, explain } })).then((r) => ({ checks, results: r.data.results })),
  });
  return (
    <Stack>
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const checks = parse();
          const bad = checks.findIndex((c) => !['user', 'service_account'].includes(c.principalType) || !c.principalId || checkPermission(c.permission));
          const msg = checks.length === 0 ? 'Add at least one check' : checks.length > 100 ? 'At most 100 checks' : bad >= 0 ? `Line ${bad + 1}: expected “user|service_account id resource:action”` : undefined;
          setLocal(msg);
          if (!msg) run.mutate(checks);
        }}
      >
        <Stack gap="xs" maw={640}>
          <Textarea
            label="Checks, one a line"
            description="principal type (user or service_account), principal id, permission — e.g. user user-42 document:write"
            autosize
            minRows={3}
            value={text}
            onChange={(e) => setText(e.currentTarget.value)}
            error={local ?? batchLineErrors(run.error)}
          />
          <Switch label="Explain each decision" checked={explain} onChange={(e) => setExplain(e.currentTarget.checked)} />
          <ProblemAlert error={batchLineErrors(run.error) ? null : run.error} />
          <GatedButton op="authorizeBatch" type="submit" loading={run.isPending} w="fit-content">
            Decide all
          </GatedButton>
        </Stack>
      </form>
      {run.data && (
        <ScrollRegion label="Batch results" minWidth={520}>
          <Table data-testid="batch-results">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>#</Table.Th>
                <Table.Th>Principal</Table.Th>
                <Table.Th>Permission</Table.Th>
                <Table.Th>Decision</Table.Th>
                <Table.Th>Why</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {run.data.results.map((r, i) => {
                const c = run.data.checks[i];
                return (
                  <Table.Tr key={r.decisionId}>
                    <Table.Td>{i + 1}</Table.Td>
                    <Table.Td>
                      {c.principalType} {c.principalId}
                    </Table.Td>
                    <Table.Td>{c.permission}</Table.Td>
                    <Table.Td>
                      <Badge color={r.allowed ? 'teal.9' : 'red.9'}>{r.allowed ? 'Allowed' : 'Denied'}</Badge>
                    </Table.Td>
                    <Table.Td>
                      {r.explanation?.grantedBy?.map((g) => g.roleSlug).join(', ') ?? r.explanation?.reason ?? r.roles.join(', ')}
                    </Table.Td>
                  </Table.Tr>
                );
              })}
            </Table.Tbody>
          </Table>
        </ScrollRegion>
      )}
    </Stack>
  );
}

/** The API's errors[].path for a batch (["body","checks","3","permission"]) as line numbers. */
function batchLineErrors(error: unknown): string | undefined {
  const lines = Object.entries(fieldErrors(error))
    .map(([k, msg]) => {
      const m = /^checks\.(\d+)\.?(.*)$/.exec(k);
      return m ? `Line ${Number(m[1]) + 1}${m[2] ? ` (${m[2]})` : ''}: ${msg}` : undefined;
    })
    .filter(Boolean);
  return lines.length ? lines.join('; ') : undefined;
}
