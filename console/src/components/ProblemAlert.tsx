import { Alert, Text } from '@mantine/core';
import { ApiProblem } from '../api/problem';

/**
 * ProblemAlert shows a failed call: the API's problem title (and detail), and the requestId
 * to quote to an operator. Any other error shows its message.
 */
export function ProblemAlert({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const p = error instanceof ApiProblem ? error : undefined;
  return (
    <Alert color="red" variant="light" title={p ? p.body.title : (title ?? 'Something went wrong')} role="alert" data-testid="problem">
      {p?.body.detail && <Text size="sm">{p.body.detail}</Text>}
      {!p && <Text size="sm">{error instanceof Error ? error.message : String(error)}</Text>}
      {p && (
        <Text size="xs" c="dimmed">
          HTTP {p.status}
          {p.requestId ? ` · request ${p.requestId}` : ''}
        </Text>
      )}
    </Alert>
  );
}
