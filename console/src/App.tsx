import { lazy, useEffect, useMemo } from 'react';
import { BrowserRouter, Navigate, Route, Routes } from 'react-router';
import { Button, Stack, Title, Text } from '@mantine/core';
import { areas } from './areas';
import { Shell } from './shell/Shell';
import { useOrganizations } from './lib/org';
import { useSession } from './lib/session';
import { goToSignIn } from './api/client';
import { Loading } from './components/States';
import { ProblemAlert } from './components/ProblemAlert';

/** App: the router under /console/, behind the session check. */
export function App() {
  const session = useSession();
  const signedOut = session.isSuccess && !session.data;
  useEffect(() => {
    if (signedOut) goToSignIn();
  }, [signedOut]);
  if (session.isPending || signedOut) return <Loading label="Checking your session" />;
  if (session.isError) return <ProblemAlert error={session.error} />;
  return (
    <BrowserRouter basename="/console">
      <AreaRoutes />
    </BrowserRouter>
  );
}

function AreaRoutes() {
  const routes = useMemo(
    () =>
      areas.map((a) => {
        const C = lazy(a.load);
        const path =
          a.scope === 'org' ? `/orgs/:orgId/${a.id}/*` : a.scope === 'project' ? `/orgs/:orgId/projects/:projectId/${a.id}/*` : `/${a.id}/*`;
        return <Route key={a.scope + a.id} path={path} element={<Shell><C /></Shell>} />;
      }),
    [],
  );
  return (
    <Routes>
      <Route path="/" element={<Home />} />
      <Route path="/orgs/:orgId" element={<OrgIndex />} />
      <Route path="/orgs/:orgId/projects/:projectId" element={<ProjectIndex />} />
      {routes}
      <Route path="*" element={<Shell><NotFound /></Shell>} />
    </Routes>
  );
}

function OrgIndex() {
  return <Navigate to="projects" replace />;
}

function ProjectIndex() {
  return <Navigate to="overview" replace />;
}

/** Home opens the first organization, or offers to create one. */
function Home() {
  const orgs = useOrganizations();
  if (orgs.isPending) return <Loading />;
  if (orgs.isError) return <ProblemAlert error={orgs.error} />;
  if (orgs.data.length > 0) return <Navigate to={`/orgs/${orgs.data[0].id}/projects`} replace />;
  return <Navigate to="/organizations" replace />;
}

function NotFound() {
  return (
    <Stack>
      <Title order={1}>Not found</Title>
      <Text>This console page does not exist.</Text>
      <Button component="a" href="/console/" w="fit-content">
        Go to the console home
      </Button>
    </Stack>
  );
}
