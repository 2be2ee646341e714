// Configuration per environment (project scope): the entries with secrets masked; an explicit,
// audited reveal (GET one entry) whose value lives only in this page's state, so it is hidden
// again when the page is left or the environment changes; add and edit (PUT: a new version),
// the version history, archive and restore.
import { useState } from 'react';
import { Badge, Button, Checkbox, Code, Group, Modal, SegmentedControl, Stack, Text, TextInput, Textarea, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Navigate, Route, Routes, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import type { components } from '../../api/schema.gen';
import { useCan, useOrgId, useProjectId } from '../../lib/org';
import { when } from '../../lib/format';
import { useProject } from '../project';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { ConfirmButton } from '../../components/ConfirmButton';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, unclaimed } from '../../components/forms';

type Entry = components['schemas']['ConfigEntry'];

export default function Configuration() {
  const projectId = useProjectId()!;
  const project = useProject(projectId);
  return (
    <QueryView query={project}>
      {(p) => (
        <Routes>
          <Route index element={<Navigate to={p.environments[0]?.id ?? ''} replace />} />
          <Route path=":environmentId" element={<EnvironmentConfig environments={p.environments} />} />
        </Routes>
      )}
    </QueryView>
  );
}

function EnvironmentConfig({ environments }: { environments: components['schemas']['Environment'][] }) {
  const { environmentId } = useParams();
  const orgId = useOrgId();
  const projectId = useProjectId();
  const navigate = useNavigate();
  const env = environments.find((e) => e.id === environmentId);
  if (!env) return <ProblemAlert error={new Error('This environment is not part of the project.')} />;
  return (
    <Stack>
      <Title order={1}>Configuration</Title>
      <SegmentedControl
        w="fit-content"
        aria-label="Environment"
        value={env.id}
        onChange={(v) => navigate(`/orgs/${orgId}/projects/${projectId}/config/${v}`)}
        data={environments.map((e) => ({ value: e.id, label: e.name }))}
      />
      {/* Keyed by environment: revealed values never carry over. */}
      <Entries key={env.id} environmentId={env.id} />
    </Stack>
  );
}

function Entries({ environmentId }: { environmentId: string }) {
  const [state, setState] = useState<'active' | 'archived'>('active');
  const [revealed, setRevealed] = useState<Record<string, unknown>>({});
  const [revealError, setRevealError] = useState<unknown>(null);
  const [editing, setEditing] = useState<Entry | 'new' | null>(null);
  const [history, setHistory] = useState<string | null>(null);
  const can = useCan();
  const qc = useQueryClient();
  const listKey = ['environments', environmentId, 'configs'];
  const entries = useQuery({
    queryKey: [...listKey, state],
    queryFn: () =>
      unwrap(api.GET('/api/v1/environments/{environmentId}/configs', { params: { path: { environmentId }, query: { state } } })).then((r) => r.data),
  });
  const refresh = () => qc.invalidateQueries({ queryKey: listKey });
  const path = (key: string) => ({ params: { path: { environmentId, key } } });
  const reveal = async (key: string) => {
    setRevealError(null);
    try {
      // Not cached anywhere: the value lives in this component's state only.
      const r = await unwrap(api.GET('/api/v1/environments/{environmentId}/configs/{key}', { ...path(key), cache: 'no-store' }));
      setRevealed((m) => ({ ...m, [key]: r.data.value }));
    } catch (e) {
      setRevealError(e);
    }
  };
  const hide = (key: string) =>
    setRevealed((m) => {
      const { [key]: _, ...rest } = m;
      void _;
      return rest;
    });
  const show = (e: Entry) => {
    if (e.masked && !(e.key in revealed)) return <Text span c="dimmed" aria-label="masked secret">••••••••</Text>;
    const v = e.key in revealed ? revealed[e.key] : e.value;
    return (
      <Code style={{ wordBreak: 'break-all', whiteSpace: 'pre-wrap' }} data-testid={`value-${e.key}`}>
        {JSON.stringify(v)}
      </Code>
    );
  };
  return (
    <Stack>
      <Group justify="space-between" wrap="wrap">
        <SegmentedControl
          value={state}
          onChange={(v) => setState(v as 'active' | 'archived')}
          aria-label="Show entries"
          data={[
            { value: 'active', label: 'Active' },
            { value: 'archived', label: 'Archived' },
          ]}
        />
        {can('putConfigEntry').allowed && (
          <Button onClick={() => setEditing('new')} variant="filled">
            Add entry
          </Button>
        )}
      </Group>
      <ProblemAlert error={revealError} />
      <QueryView query={entries} empty={state === 'active' ? 'No configuration in this environment yet.' : 'No archived entries.'}>
        {(rows) => (
          <DataTable
            caption="Configuration entries"
            rows={rows}
            rowKey={(e) => e.key}
            initialSort={{ key: 'key', dir: 'asc' }}
            columns={[
              { key: 'key', header: 'Key', sortValue: (e) => e.key, render: (e) => <Text ff="monospace" size="sm">{e.key}</Text> },
              { key: 'value', header: 'Value', render: show },
              {
                key: 'kind',
                header: 'Kind',
                sortValue: (e) => (e.secret ? 1 : 0),
                render: (e) => (e.secret ? <Badge color="grape" variant="light">secret</Badge> : <Badge variant="light">plain</Badge>),
              },
              { key: 'version', header: 'Version', sortValue: (e) => e.version, render: (e) => e.version },
              { key: 'updated', header: 'Updated', sortValue: (e) => e.updatedAt, render: (e) => when(e.updatedAt) },
              {
                key: 'actions',
                header: 'Actions',
                render: (e) => (
                  <Group gap={6} wrap="wrap">
                    {state === 'active' && e.secret && !(e.key in revealed) && (
                      <GatedButton op="getConfigEntry" size="xs" variant="light" onClick={() => reveal(e.key)} aria-label={`Reveal ${e.key}`}>
                        Reveal
                      </GatedButton>
                    )}
                    {e.key in revealed && (
                      <Button size="xs" variant="light" onClick={() => hide(e.key)} aria-label={`Hide ${e.key}`}>
                        Hide
                      </Button>
                    )}
                    <Button size="xs" variant="subtle" onClick={() => setHistory(e.key)} aria-label={`History of ${e.key}`}>
                      History
                    </Button>
                    {state === 'active' && can('putConfigEntry').allowed && (
                      <Button size="xs" variant="subtle" onClick={() => setEditing(e)} aria-label={`Edit ${e.key}`}>
                        Edit
                      </Button>
                    )}
                    {state === 'active' ? (
                      <ConfirmButton
                        op="archiveConfigEntry"
                        size="xs"
                        title={`Archive ${e.key}`}
                        message="The entry answers 404 by key until restored; its history stays."
                        confirmLabel="Archive entry"
                        onConfirm={() => unwrap(api.DELETE('/api/v1/environments/{environmentId}/configs/{key}', path(e.key))).then(refresh)}
                      >
                        Archive
                      </ConfirmButton>
                    ) : (
                      <ConfirmButton
                        op="restoreConfigEntry"
                        color="indigo"
                        size="xs"
                        title={`Restore ${e.key}`}
                        message="The entry comes back with its latest version."
                        confirmLabel="Restore entry"
                        onConfirm={() => unwrap(api.POST('/api/v1/environments/{environmentId}/configs/{key}/restore', path(e.key))).then(refresh)}
                      >
                        Restore
                      </ConfirmButton>
                    )}
                  </Group>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <Modal opened={editing !== null} onClose={() => setEditing(null)} title={editing === 'new' ? 'Add an entry' : `Edit ${editing?.key ?? ''}`} size="lg">
        {editing !== null && (
          <EditEntry
            environmentId={environmentId}
            entry={editing === 'new' ? undefined : editing}
            onDone={() => {
              if (editing !== 'new') hide(editing.key);
              setEditing(null);
              refresh();
            }}
          />
        )}
      </Modal>
      <Modal opened={history !== null} onClose={() => setHistory(null)} title={`History of ${history ?? ''}`} size="lg">
        {history && <History environmentId={environmentId} entryKey={history} />}
      </Modal>
    </Stack>
  );
}

function EditEntry({ environmentId, entry, onDone }: { environmentId: string; entry?: Entry; onDone: () => void }) {
  const [key, setKey] = useState(entry?.key ?? '');
  const [kind, setKind] = useState<'text' | 'json'>(entry && !entry.masked && typeof entry.value !== 'string' ? 'json' : 'text');
  const [raw, setRaw] = useState(entry && !entry.masked ? (typeof entry.value === 'string' ? entry.value : JSON.stringify(entry.value, null, 2)) : '');
  const [secret, setSecret] = useState(entry?.secret ?? false);
  const [description, setDescription] = useState(entry?.description ?? '');
  const [jsonError, setJsonError] = useState<string | undefined>();
  const save = useMutation({
    mutationFn: (value: unknown) =>
      unwrap(
        api.PUT('/api/v1/environments/{environmentId}/configs/{key}', {
          params: { path: { environmentId, key } },
          body: { value, secret, ...(description ? { description } : {}) },
        }),
      ),
    onSuccess: onDone,
  });
  const submit = () => {
    setJsonError(undefined);
    let value: unknown = raw;
    if (kind === 'json') {
      try {
        value = JSON.parse(raw);
      } catch {
        setJsonError('is not valid JSON');
        return;
      }
    }
    save.mutate(value);
  };
  const pathError = fieldError(save.error, 'path.key');
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <Stack gap="sm">
        <TextInput label="Key" value={key} onChange={(e) => setKey(e.currentTarget.value)} readOnly={!!entry} required error={pathError} ff="monospace" />
        <SegmentedControl
          w="fit-content"
          aria-label="Value type"
          value={kind}
          onChange={(v) => setKind(v as 'text' | 'json')}
          data={[
            { value: 'text', label: 'Text' },
            { value: 'json', label: 'JSON' },
          ]}
        />
        <Textarea
          label="Value"
          description={entry?.masked ? 'The current value is a secret: type the new value.' : kind === 'json' ? 'Any JSON value' : 'Stored as a JSON string'}
          value={raw}
          onChange={(e) => setRaw(e.currentTarget.value)}
          autosize
          minRows={2}
          error={jsonError ?? fieldError(save.error, 'value')}
          ff="monospace"
        />
        <Checkbox label="Secret (sealed at rest, masked in lists)" checked={secret} onChange={(e) => setSecret(e.currentTarget.checked)} />
        <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} error={fieldError(save.error, 'description')} />
        <ProblemAlert error={unclaimed(save.error, ['value', 'description', 'secret', 'path.key'])} />
        <Group justify="flex-end">
          <GatedButton op="putConfigEntry" type="submit" loading={save.isPending}>
            {entry ? 'Save new version' : 'Add entry'}
          </GatedButton>
        </Group>
      </Stack>
    </form>
  );
}

function History({ environmentId, entryKey }: { environmentId: string; entryKey: string }) {
  const versions = useQuery({
    queryKey: ['environments', environmentId, 'configs', entryKey, 'versions'],
    queryFn: () =>
      unwrap(api.GET('/api/v1/environments/{environmentId}/configs/{key}/versions', { params: { path: { environmentId, key: entryKey } } })).then(
        (r) => r.data,
      ),
  });
  return (
    <QueryView query={versions} empty="No versions.">
      {(rows) => (
        <DataTable
          caption={`Versions of ${entryKey}`}
          rows={rows}
          rowKey={(v) => String(v.version)}
          initialSort={{ key: 'version', dir: 'desc' }}
          columns={[
            { key: 'version', header: 'Version', sortValue: (v) => v.version, render: (v) => v.version },
            { key: 'value', header: 'Value', render: (v) => (v.masked ? <Text span c="dimmed">••••••••</Text> : <Code>{JSON.stringify(v.value)}</Code>) },
            { key: 'by', header: 'By', render: (v) => <Text size="xs" ff="monospace">{v.createdBy.id}</Text> },
            { key: 'at', header: 'When', sortValue: (v) => v.createdAt, render: (v) => when(v.createdAt) },
          ]}
        />
      )}
    </QueryView>
  );
}
