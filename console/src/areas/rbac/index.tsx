// Access control (project scope): the project's roles and their permissions, role bindings with
// expiry, and the authorize playground (a decision with its explanation, a batch of checks,
// and a principal's effective permissions). The tab is in the URL (?tab=) so a view can be linked.
import { Stack, Tabs, Text, Title } from '@mantine/core';
import { useSearchParams } from 'react-router';
import { Roles } from './Roles';
import { Bindings } from './Bindings';
import { Playground } from './Playground';

const tabs = ['roles', 'bindings', 'playground'] as const;

export default function Rbac() {
  const [params, setParams] = useSearchParams();
  const tab = tabs.find((t) => t === params.get('tab')) ?? 'roles';
  return (
    <Stack>
      <Title order={1}>Access control</Title>
      <Text size="sm">Roles grant your product’s permissions to its users and service accounts through bindings; the playground asks the same question your services ask.</Text>
      <Tabs value={tab} onChange={(v) => setParams(v && v !== 'roles' ? { tab: v } : {}, { replace: true })} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="roles">Roles</Tabs.Tab>
          <Tabs.Tab value="bindings">Bindings</Tabs.Tab>
          <Tabs.Tab value="playground">Playground</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="roles" pt="md">
          <Roles />
        </Tabs.Panel>
        <Tabs.Panel value="bindings" pt="md">
          <Bindings />
        </Tabs.Panel>
        <Tabs.Panel value="playground" pt="md">
          <Playground />
        </Tabs.Panel>
      </Tabs>
    </Stack>
  );
}
