// A project's environments (GET /api/v1/projects/{projectId}) and a select over them, for
// the areas whose calls take an environmentId (analytics, billing, webhooks).
import { Select } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api, unwrap } from '../api/client';

/** The project with its environments. */
export function useProjectEnvironments(projectId: string | undefined) {
  return useQuery({
    queryKey: ['projects', projectId, 'detail'],
    enabled: !!projectId,
    queryFn: () =>
      unwrap(api.GET('/api/v1/projects/{projectId}', { params: { path: { projectId: projectId! } } })).then((r) => r.data),
  });
}

/**
 * EnvironmentSelect picks one of the project's environments; with allLabel, '' stands for
 * every environment (the call is made without environmentId).
 */
export function EnvironmentSelect({
  projectId,
  value,
  onChange,
  allLabel,
  label = 'Environment',
  error,
}: {
  projectId: string;
  value: string;
  onChange: (v: string) => void;
  allLabel?: string;
  label?: string;
  error?: string;
}) {
  const p = useProjectEnvironments(projectId);
  const data = [
    ...(allLabel ? [{ value: '', label: allLabel }] : []),
    ...(p.data?.environments ?? []).map((e) => ({ value: e.id, label: e.name })),
  ];
  return (
    <Select
      label={label}
      data={data}
      value={value}
      onChange={(v) => onChange(v ?? '')}
      allowDeselect={false}
      placeholder={p.isPending ? 'Loading…' : undefined}
      error={error}
      w={{ base: '100%', xs: 220 }}
      comboboxProps={{ withinPortal: true }}
    />
  );
}

/** The environment's name for an id, or the id. */
export function useEnvironmentName(projectId: string | undefined): (id: string | null | undefined) => string {
  const p = useProjectEnvironments(projectId);
  return (id) => (id ? (p.data?.environments.find((e) => e.id === id)?.name ?? id) : 'All environments');
}
