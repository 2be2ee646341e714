import { Suspense, type ReactNode } from 'react';
import { AppShell, Burger, Group, Menu, NavLink as MNavLink, ScrollArea, Select, Text, UnstyledButton } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { Link, NavLink, useLocation, useNavigate, useParams } from 'react-router';
import { useQueryClient } from '@tanstack/react-query';
import { areas } from '../areas';
import { api, signInURL } from '../api/client';
import { useOrganizations } from '../lib/org';
import { useSession } from '../lib/session';
import { Loading } from '../components/States';
import { ErrorBoundary } from './ErrorBoundary';

/** Shell is the frame of every signed-in view: header (org switcher, user menu) and area nav. */
export function Shell({ children }: { children: ReactNode }) {
  const [opened, { toggle, close }] = useDisclosure();
  const { orgId, projectId } = useParams();
  const location = useLocation();
  const orgNav = orgId ? areas.filter((a) => a.scope === 'org' && a.nav !== false) : [];
  const projectNav = orgId && projectId ? areas.filter((a) => a.scope === 'project' && a.nav !== false) : [];
  const userNav = areas.filter((a) => a.scope === 'user' && a.nav !== false);
  // The active link is the longest one the path is under (Projects is not active inside a project).
  const targets = [
    ...orgNav.map((a) => `/orgs/${orgId}/${a.id}`),
    ...projectNav.map((a) => `/orgs/${orgId}/projects/${projectId}/${a.id}`),
    ...userNav.map((a) => `/${a.id}`),
  ];
  const here = location.pathname;
  const active = targets.filter((to) => here === to || here.startsWith(to + '/')).sort((a, b) => b.length - a.length)[0];
  const link = (to: string, label: string) => (
    <MNavLink key={to} component={Link} to={to} label={label} onClick={close} active={to === active} />
  );
  return (
    <AppShell header={{ height: 56 }} navbar={{ width: 240, breakpoint: 'sm', collapsed: { mobile: !opened } }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Text component={NavLink} to="/" fw={700} visibleFrom="xs">
              Gatehouse
            </Text>
            <OrgSwitcher />
          </Group>
          <UserMenu />
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Console">
        <ScrollArea>
          {orgNav.map((a) => link(`/orgs/${orgId}/${a.id}`, a.label))}
          {projectNav.length > 0 && (
            <>
              <Text size="xs" c="dimmed" mt="md" mb={4} px="sm" fw={700}>
                Project
              </Text>
              {projectNav.map((a) => link(`/orgs/${orgId}/projects/${projectId}/${a.id}`, a.label))}
            </>
          )}
          <Text size="xs" c="dimmed" mt="md" mb={4} px="sm" fw={700}>
            You
          </Text>
          {userNav.map((a) => link(`/${a.id}`, a.label))}
        </ScrollArea>
      </AppShell.Navbar>
      <AppShell.Main>
        <ErrorBoundary key={location.pathname}>
          <Suspense fallback={<Loading />}>{children}</Suspense>
        </ErrorBoundary>
      </AppShell.Main>
    </AppShell>
  );
}

function OrgSwitcher() {
  const { orgId } = useParams();
  const navigate = useNavigate();
  const orgs = useOrganizations();
  const data = (orgs.data ?? []).map((o) => ({ value: o.id, label: o.name }));
  return (
    <Select
      aria-label="Organization"
      placeholder={orgs.isPending ? 'Loading…' : 'Choose an organization'}
      data={data}
      value={orgId ?? null}
      onChange={(v) => v && navigate(`/orgs/${v}/projects`)}
      allowDeselect={false}
      w={{ base: 150, sm: 220 }}
      size="sm"
      comboboxProps={{ withinPortal: true }}
      data-testid="org-switcher"
    />
  );
}

function UserMenu() {
  const session = useSession();
  const qc = useQueryClient();
  const email = session.data?.user.email ?? '';
  const signOut = async () => {
    await api.POST('/api/auth/sign-out', {});
    qc.clear();
    window.location.assign(signInURL('/console/'));
  };
  return (
    <Menu position="bottom-end" withinPortal>
      <Menu.Target>
        <UnstyledButton aria-label={`Account menu for ${email}`} data-testid="user-menu">
          <Text size="sm" truncate maw={{ base: 90, sm: 240 }}>
            {email || 'Account'}
          </Text>
        </UnstyledButton>
      </Menu.Target>
      <Menu.Dropdown>
        <Menu.Label>{email}</Menu.Label>
        <Menu.Item component="a" href="/api/auth/account">
          Security (second factor, passkeys)
        </Menu.Item>
        <Menu.Item component="a" href="/docs">
          API reference
        </Menu.Item>
        <Menu.Item onClick={signOut} color="red">
          Sign out
        </Menu.Item>
      </Menu.Dropdown>
    </Menu>
  );
}
