import { useState } from 'react';
import { Button, Checkbox, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { useSession } from '../../lib/session';
import { ProblemAlert } from '../../components/ProblemAlert';
import { fieldError, unclaimed } from '../../components/forms';

export function Section({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <Stack gap="xs" component="section" aria-label={title} maw={560}>
      <Title order={2} size="h3">
        {title}
      </Title>
      {children}
    </Stack>
  );
}

export function Profile() {
  const session = useSession();
  const user = session.data?.user;
  const qc = useQueryClient();
  const [name, setName] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/update-user', { body: { name: name ?? user?.name ?? '' } })),
    onSuccess: () => {
      setName(null);
      qc.invalidateQueries({ queryKey: ['session'] });
    },
  });
  return (
    <Section title="Profile">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          save.mutate();
        }}
      >
        <Stack gap="xs">
          <TextInput
            label="Name"
            value={name ?? user?.name ?? ''}
            onChange={(e) => setName(e.currentTarget.value)}
            error={fieldError(save.error, 'name')}
            required
            maxLength={100}
          />
          <Text size="sm">
            Email: <strong data-testid="account-email">{user?.email}</strong> {user?.emailVerified ? '(verified)' : '(not verified)'}
          </Text>
          <ProblemAlert error={unclaimed(save.error, ['name'])} />
          {save.isSuccess && <Text size="sm" role="status">Saved.</Text>}
          <Button type="submit" loading={save.isPending} w="fit-content">
            Save profile
          </Button>
        </Stack>
      </form>
    </Section>
  );
}

export function ChangeEmail() {
  const [newEmail, setNewEmail] = useState('');
  const change = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/change-email', { body: { newEmail, callbackURL: '/console/account' } })),
  });
  return (
    <Section title="Email address">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          change.mutate();
        }}
      >
        <Stack gap="xs">
          <TextInput
            type="email"
            label="New email address"
            value={newEmail}
            onChange={(e) => setNewEmail(e.currentTarget.value)}
            error={fieldError(change.error, 'newEmail')}
            required
          />
          <ProblemAlert error={unclaimed(change.error, ['newEmail'])} />
          {change.isSuccess && (
            <Text size="sm" role="status">
              A link went to {newEmail}. The address changes when you open it (within 24 hours).
            </Text>
          )}
          <Button type="submit" loading={change.isPending} w="fit-content">
            Change email
          </Button>
        </Stack>
      </form>
    </Section>
  );
}

export function ChangePassword() {
  const qc = useQueryClient();
  const [currentPassword, setCurrent] = useState('');
  const [newPassword, setNew] = useState('');
  const [revokeOtherSessions, setRevoke] = useState(false);
  const change = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/change-password', { body: { currentPassword, newPassword, revokeOtherSessions } })),
    onSuccess: () => {
      setCurrent('');
      setNew('');
      qc.invalidateQueries({ queryKey: ['account', 'sessions'] });
    },
  });
  return (
    <Section title="Password">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          change.mutate();
        }}
      >
        <Stack gap="xs">
          <PasswordInput
            label="Current password"
            autoComplete="current-password"
            value={currentPassword}
            onChange={(e) => setCurrent(e.currentTarget.value)}
            error={fieldError(change.error, 'currentPassword')}
            required
          />
          <PasswordInput
            label="New password"
            description="At least 8 characters"
            autoComplete="new-password"
            value={newPassword}
            onChange={(e) => setNew(e.currentTarget.value)}
            error={fieldError(change.error, 'newPassword')}
            required
            minLength={8}
          />
          <Checkbox
            label="Also end the access of applications I signed in to (their refresh tokens stop working)"
            checked={revokeOtherSessions}
            onChange={(e) => setRevoke(e.currentTarget.checked)}
          />
          <Text size="sm">Your other sessions end either way; this one stays signed in.</Text>
          <ProblemAlert error={unclaimed(change.error, ['currentPassword', 'newPassword'])} />
          {change.isSuccess && <Text size="sm" role="status">Password changed.</Text>}
          <Button type="submit" loading={change.isPending} w="fit-content">
            Change password
          </Button>
        </Stack>
      </form>
    </Section>
  );
}
