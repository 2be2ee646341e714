import type { ReactNode } from 'react';
import { Center, Loader, Stack, Text } from '@mantine/core';
import type { UseQueryResult } from '@tanstack/react-query';
import { ProblemAlert } from './ProblemAlert';

export function Loading({ label = 'Loading' }: { label?: string }) {
  return (
    <Center py="xl" role="status" aria-live="polite">
      <Loader size="sm" aria-hidden />
      <Text size="sm" ml="sm">
        {label}…
      </Text>
    </Center>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return (
    <Stack align="center" py="xl" gap="xs" data-testid="empty">
      <Text c="dimmed">{children}</Text>
    </Stack>
  );
}

/**
 * QueryView renders a query's loading, error and empty states, and children(data) otherwise.
 * isEmpty decides emptiness (default: an empty array).
 */
export function QueryView<T>({
  query,
  empty,
  isEmpty = (d) => Array.isArray(d) && d.length === 0,
  children,
}: {
  query: UseQueryResult<T>;
  empty?: ReactNode;
  isEmpty?: (data: T) => boolean;
  children: (data: T) => ReactNode;
}) {
  if (query.isPending) return <Loading />;
  if (query.isError) return <ProblemAlert error={query.error} />;
  if (empty !== undefined && isEmpty(query.data)) return <Empty>{empty}</Empty>;
  return <>{children(query.data)}</>;
}
