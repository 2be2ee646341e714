import { useState } from 'react';
import { Badge, Card, Code, Group, PasswordInput, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../../api/client';
import { useProjectEnvironments } from '../../lib/projectEnvironments';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { GatedButton } from '../../components/GatedButton';
import { ConfirmButton } from '../../components/ConfirmButton';
import { fieldError, unclaimed } from '../../components/forms';

/** Processor: one card per environment with its Stripe connection. */
export function Processor({ projectId }: { projectId: string }) {
  const p = useProjectEnvironments(projectId);
  return (
    <Stack gap="xs">
      <Title order={2} size="h3">Payment processor</Title>
      <Text size="sm">
        Each environment connects to Stripe with its own secret key and webhook signing secret. They are stored sealed and never shown again;
        only the key&apos;s mode and last four characters are.
      </Text>
      <QueryView query={p}>
        {(project) => (
          <SimpleGrid cols={{ base: 1, md: 3 }}>
            {project.environments.map((e) => (
              <Connection key={e.id} environmentId={e.id} name={e.name} />
            ))}
          </SimpleGrid>
        )}
      </QueryView>
    </Stack>
  );
}

function Connection({ environmentId, name }: { environmentId: string; name: string }) {
  const qc = useQueryClient();
  const key = ['environments', environmentId, 'processor-connection'];
  const q = useQuery({
    queryKey: key,
    queryFn: () =>
      unwrap(api.GET('/api/v1/environments/{environmentId}/processor-connection', { params: { path: { environmentId } } })).then((r) => r.data),
  });
  const [secretKey, setSecretKey] = useState('');
  const [webhookSecret, setWebhookSecret] = useState('');
  const put = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/api/v1/environments/{environmentId}/processor-connection', {
          params: { path: { environmentId } },
          body: { secretKey, webhookSecret },
        }),
      ),
    onSuccess: () => {
      setSecretKey('');
      setWebhookSecret('');
      qc.invalidateQueries({ queryKey: key });
    },
  });
  return (
    <Card withBorder component="section" aria-label={`${name} processor connection`}>
      <Stack gap="xs">
        <Title order={3} size="h4">{name}</Title>
        <QueryView query={q}>
          {(c) => (
            <Stack gap={4}>
              <Group gap="xs">
                <Badge color={c.connected ? 'teal.9' : 'gray.8'} variant="outline" data-testid={`processor-${name}`}>
                  {c.connected ? `Connected (${c.mode})` : 'Not connected'}
                </Badge>
                {c.secretKeyLast4 && <Text size="sm">key ••••{c.secretKeyLast4}</Text>}
              </Group>
              <Text size="sm">Webhook endpoint to set in Stripe:</Text>
              <Code block style={{ wordBreak: 'break-all', whiteSpace: 'pre-wrap' }}>{c.webhookEndpointUrl}</Code>
              {c.connected && (
                <ConfirmButton
                  op="deleteProcessorConnection"
                  size="xs"
                  w="fit-content"
                  title={`Disconnect ${name}`}
                  message="The stored secrets are deleted; checkouts and processor webhooks in this environment stop working until you connect again."
                  confirmLabel="Disconnect"
                  onConfirm={() =>
                    unwrap(api.DELETE('/api/v1/environments/{environmentId}/processor-connection', { params: { path: { environmentId } } })).then(() =>
                      qc.invalidateQueries({ queryKey: key }),
                    )
                  }
                >
                  Disconnect
                </ConfirmButton>
              )}
            </Stack>
          )}
        </QueryView>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            put.mutate();
          }}
        >
          <Stack gap="xs">
            <PasswordInput
              label="Stripe secret key"
              description="sk_test_…, sk_live_…, rk_test_… or rk_live_…"
              value={secretKey}
              onChange={(e) => setSecretKey(e.currentTarget.value)}
              error={fieldError(put.error, 'secretKey')}
              aria-invalid={!!fieldError(put.error, 'secretKey')}
              autoComplete="off"
              required
            />
            <PasswordInput
              label="Webhook signing secret"
              description="whsec_…"
              value={webhookSecret}
              onChange={(e) => setWebhookSecret(e.currentTarget.value)}
              error={fieldError(put.error, 'webhookSecret')}
              aria-invalid={!!fieldError(put.error, 'webhookSecret')}
              autoComplete="off"
              required
            />
            <ProblemAlert error={unclaimed(put.error, ['secretKey', 'webhookSecret'])} />
            <GatedButton op="putProcessorConnection" type="submit" size="sm" loading={put.isPending} w="fit-content">
              {q.data?.connected ? 'Replace secrets' : 'Connect'}
            </GatedButton>
          </Stack>
        </form>
      </Stack>
    </Card>
  );
}
