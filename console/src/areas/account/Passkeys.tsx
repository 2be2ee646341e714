import { useState } from 'react';
import { Button, Group, Stack, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { startRegistration, type PublicKeyCredentialCreationOptionsJSON } from '@simplewebauthn/browser';
import { api, unwrap } from '../../api/client';
import type { components } from '../../api/schema.gen';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { ConfirmButton } from '../../components/ConfirmButton';
import { fieldError, unclaimed } from '../../components/forms';
import { when } from '../usage/format';
import { Section } from './Profile';

type Passkey = components['schemas']['AuthPasskey'];
const key = ['account', 'passkeys'];

export function Passkeys() {
  const qc = useQueryClient();
  const q = useQuery({ queryKey: key, queryFn: () => unwrap(api.GET('/api/auth/passkey/list-user-passkeys', {})) });
  const [name, setName] = useState('');
  const register = useMutation({
    mutationFn: async () => {
      const options = await unwrap(api.GET('/api/auth/passkey/generate-register-options', { params: { query: {} } }));
      const response = await startRegistration({ optionsJSON: options as unknown as PublicKeyCredentialCreationOptionsJSON });
      return unwrap(
        api.POST('/api/auth/passkey/verify-registration', {
          body: { response: response as unknown as Record<string, unknown>, ...(name ? { name } : {}) },
        }),
      );
    },
    onSuccess: () => {
      setName('');
      qc.invalidateQueries({ queryKey: key });
    },
  });
  return (
    <Section title="Passkeys">
      <QueryView query={q} empty="No passkeys yet.">
        {(rows) => (
          <DataTable
            caption="Your passkeys"
            rows={rows}
            rowKey={(p) => p.id}
            initialSort={{ key: 'created', dir: 'asc' }}
            columns={[
              { key: 'name', header: 'Name', sortValue: (p) => p.name ?? '', render: (p) => <Rename p={p} /> },
              { key: 'type', header: 'Kind', sortValue: (p) => p.deviceType, render: (p) => (p.backedUp ? 'synced' : 'this device only') },
              { key: 'created', header: 'Added', sortValue: (p) => p.createdAt, render: (p) => when(p.createdAt) },
              {
                key: 'actions',
                header: 'Actions',
                render: (p) => (
                  <ConfirmButton
                    size="xs"
                    title="Remove passkey"
                    message={`You can no longer sign in with ${p.name ?? 'this passkey'}.`}
                    confirmLabel="Remove"
                    aria-label={`Remove passkey ${p.name ?? p.id}`}
                    onConfirm={() => unwrap(api.POST('/api/auth/passkey/delete-passkey', { body: { id: p.id } })).then(() => qc.invalidateQueries({ queryKey: key }))}
                  >
                    Remove
                  </ConfirmButton>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          register.mutate();
        }}
      >
        <Stack gap="xs">
          <TextInput label="Name for a new passkey (optional)" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(register.error, 'name')} maxLength={100} />
          <ProblemAlert error={unclaimed(register.error, ['name'])} />
          <Button type="submit" loading={register.isPending} w="fit-content">
            Add a passkey
          </Button>
          <Text size="sm">Your browser asks which authenticator to use (this device, a phone, a security key).</Text>
        </Stack>
      </form>
    </Section>
  );
}

function Rename({ p }: { p: Passkey }) {
  const qc = useQueryClient();
  const [name, setName] = useState(p.name ?? '');
  const save = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/passkey/update-passkey', { body: { id: p.id, name } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: key }),
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <Group gap="xs" wrap="nowrap" align="flex-start">
        <TextInput size="xs" aria-label={`Name of passkey ${p.name ?? p.id}`} value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(save.error, 'name')} />
        <Button size="xs" variant="default" type="submit" loading={save.isPending} disabled={name === (p.name ?? '') || name === ''}>
          Rename
        </Button>
      </Group>
      <ProblemAlert error={unclaimed(save.error, ['name'])} />
    </form>
  );
}
