// The organization (and project) the console is looking at comes from the URL:
// /console/orgs/:orgId/... and /console/orgs/:orgId/projects/:projectId/...
import { useParams } from 'react-router';
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client';
import { grant, useMemberPermissions, type Grant, type OperationId } from '../api/permissions';

export function useOrgId(): string | undefined {
  return useParams().orgId;
}

export function useProjectId(): string | undefined {
  return useParams().projectId;
}

/** The caller's organizations (active ones unless state is given). */
export function useOrganizations(state: 'active' | 'archived' = 'active') {
  return useQuery({
    queryKey: ['organizations', 'list', state],
    queryFn: () => unwrap(api.GET('/api/v1/organizations', { params: { query: { state } } })).then((r) => r.data),
  });
}

/**
 * useCan tells whether the member may call an operation in the current organization, with the
 * reason when not: the spec's x-permission against the member's permissions.
 */
export function useCan(): (op: OperationId) => Grant {
  const orgId = useOrgId();
  const perms = useMemberPermissions(orgId);
  return (op) => grant(op, perms.data?.role, perms.data?.permissions);
}
