// The console's areas: ONE line each. An area is a folder src/areas/<id>/ whose index.tsx
// default-exports a component; it is loaded lazily (its own chunk, outside the initial-JS
// budget) and mounted at
//   scope 'org':     /console/orgs/:orgId/<id>/*
//   scope 'project': /console/orgs/:orgId/projects/:projectId/<id>/*
//   scope 'user':    /console/<id>/*
// The component may declare nested <Routes> for its own sub-pages. nav: false keeps it out of
// the side navigation (it is reached by links).
import type { ComponentType } from 'react';

export interface Area {
  id: string;
  label: string;
  scope: 'org' | 'project' | 'user';
  load: () => Promise<{ default: ComponentType }>;
  nav?: boolean;
}

export const areas: Area[] = [
  { id: 'projects', label: 'Projects', scope: 'org', load: () => import('./projects') },
  { id: 'members', label: 'Members', scope: 'org', load: () => import('./members') },
  { id: 'audit-logs', label: 'Audit log', scope: 'org', load: () => import('./audit') },
  { id: 'settings', label: 'Organization settings', scope: 'org', load: () => import('./organization') },
  { id: 'overview', label: 'Overview', scope: 'project', load: () => import('./project') },
  { id: 'config', label: 'Configuration', scope: 'project', load: () => import('./config') },
  { id: 'audit-logs', label: 'Project audit log', scope: 'project', load: () => import('./audit') },
  { id: 'service-accounts', label: 'Service accounts', scope: 'project', load: () => import('./service-accounts') },
  { id: 'rbac', label: 'Access control', scope: 'project', load: () => import('./rbac') },
  { id: 'oidc-clients', label: 'OIDC clients', scope: 'project', load: () => import('./oidc-clients') },
  { id: 'organizations', label: 'Organizations', scope: 'user', load: () => import('./organizations') },
  { id: 'usage', label: 'Usage analytics', scope: 'project', load: () => import('./usage') },
  { id: 'billing', label: 'Billing', scope: 'project', load: () => import('./billing') },
  { id: 'webhooks', label: 'Webhooks', scope: 'project', load: () => import('./webhooks') },
  { id: 'account', label: 'Your account', scope: 'user', load: () => import('./account') },
];
