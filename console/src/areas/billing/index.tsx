// Billing (project scope): the payment processor connection of each environment (secrets
// write-only and masked) and the project's plans (create, edit, archive, restore).
import { Stack, Title } from '@mantine/core';
import { useProjectId } from '../../lib/org';
import { Processor } from './Processor';
import { Plans } from './Plans';

export default function Billing() {
  const projectId = useProjectId()!;
  return (
    <Stack gap="xl">
      <Title order={1}>Billing</Title>
      <Plans projectId={projectId} />
      <Processor projectId={projectId} />
    </Stack>
  );
}
