import { Badge, Stack, Text } from '@mantine/core';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { useSession } from '../../lib/session';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ConfirmButton } from '../../components/ConfirmButton';
import { when } from '../usage/format';
import { Section } from './Profile';

export function Sessions() {
  const me = useSession();
  const qc = useQueryClient();
  const q = useQuery({
    queryKey: ['account', 'sessions'],
    queryFn: () => unwrap(api.GET('/api/auth/list-sessions', {})),
  });
  const currentId = me.data?.session.id;
  const refresh = () => qc.invalidateQueries({ queryKey: ['account', 'sessions'] });
  const others = (q.data ?? []).filter((s) => s.id !== currentId).length;
  return (
    <Section title="Sessions">
      <QueryView query={q} empty="No sessions.">
        {(rows) => (
          <Stack gap="xs">
            <DataTable
              caption="Your signed-in sessions"
              rows={rows}
              rowKey={(s) => s.id}
              pageSize={10}
              initialSort={{ key: 'created', dir: 'desc' }}
              columns={[
                {
                  key: 'device',
                  header: 'Browser',
                  sortValue: (s) => s.userAgent,
                  render: (s) => (
                    <Stack gap={2}>
                      <Text size="sm" lineClamp={2} maw={320}>
                        {s.userAgent || 'Unknown'}
                      </Text>
                      {s.id === currentId && (
                        <Badge variant="outline" color="teal.9" w="fit-content">
                          this session
                        </Badge>
                      )}
                    </Stack>
                  ),
                },
                { key: 'ip', header: 'IP address', sortValue: (s) => s.ipAddress, render: (s) => s.ipAddress || '—' },
                { key: 'created', header: 'Signed in', sortValue: (s) => s.createdAt, render: (s) => when(s.createdAt) },
                { key: 'expires', header: 'Expires', sortValue: (s) => s.expiresAt, render: (s) => when(s.expiresAt) },
                {
                  key: 'actions',
                  header: 'Actions',
                  render: (s) =>
                    s.id === currentId ? null : (
                      <ConfirmButton
                        size="xs"
                        title="Revoke session"
                        message="That browser is signed out at its next request."
                        confirmLabel="Revoke"
                        aria-label={`Revoke session signed in ${when(s.createdAt)}`}
                        onConfirm={() => unwrap(api.POST('/api/auth/revoke-session', { body: { token: s.token } })).then(refresh)}
                      >
                        Revoke
                      </ConfirmButton>
                    ),
                },
              ]}
            />
            <ConfirmButton
              w="fit-content"
              disabled={others === 0}
              title="Sign out all other sessions"
              message="Every other browser and device signed in as you is signed out. This one stays."
              confirmLabel="Sign out others"
              onConfirm={() => unwrap(api.POST('/api/auth/revoke-other-sessions', { body: {} })).then(refresh)}
            >
              Sign out all other sessions
            </ConfirmButton>
          </Stack>
        )}
      </QueryView>
    </Section>
  );
}
