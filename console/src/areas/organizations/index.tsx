// Organizations (user scope): the caller's organizations, active and archived; create one;
// restore an archived one. Renaming and archiving live in the organization's settings area.
import { useState } from 'react';
import { Badge, Button, Group, SegmentedControl, Stack, TextInput, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useOrganizations } from '../../lib/org';
import { DataTable } from '../../components/DataTable';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { fieldError, unclaimed } from '../../components/forms';
import { ConfirmButton } from '../../components/ConfirmButton';

export default function Organizations() {
  const [state, setState] = useState<'active' | 'archived'>('active');
  const orgs = useOrganizations(state);
  const qc = useQueryClient();
  const restore = (id: string) =>
    unwrap(api.POST('/api/v1/organizations/{organizationId}/restore', { params: { path: { organizationId: id } } })).then(() =>
      qc.invalidateQueries({ queryKey: ['organizations'] }),
    );
  return (
    <Stack>
      <Title order={1}>Organizations</Title>
      <CreateOrganization />
      <SegmentedControl
        w="fit-content"
        value={state}
        onChange={(v) => setState(v as 'active' | 'archived')}
        data={[
          { value: 'active', label: 'Active' },
          { value: 'archived', label: 'Archived' },
        ]}
        aria-label="Show organizations"
      />
      <QueryView query={orgs} empty={state === 'active' ? 'You are not a member of any organization yet.' : 'No archived organizations.'}>
        {(rows) => (
          <DataTable
            caption="Your organizations"
            rows={rows}
            rowKey={(o) => o.id}
            initialSort={{ key: 'name', dir: 'asc' }}
            columns={[
              {
                key: 'name',
                header: 'Name',
                sortValue: (o) => o.name.toLowerCase(),
                render: (o) => (state === 'active' ? <Link to={`/orgs/${o.id}/projects`}>{o.name}</Link> : o.name),
              },
              { key: 'slug', header: 'Slug', sortValue: (o) => o.slug, render: (o) => o.slug },
              { key: 'role', header: 'Your role', sortValue: (o) => o.role, render: (o) => <Badge variant="light">{o.role}</Badge> },
              {
                key: 'actions',
                header: 'Actions',
                render: (o) =>
                  state === 'archived' ? (
                    <ConfirmButton
                      color="indigo"
                      size="xs"
                      title={`Restore ${o.name}`}
                      message="The organization, its projects and their history come back."
                      confirmLabel="Restore"
                      onConfirm={() => restore(o.id)}
                      disabled={o.role.split(',').every((r) => r.trim() !== 'owner')}
                    >
                      Restore
                    </ConfirmButton>
                  ) : null,
              },
            ]}
          />
        )}
      </QueryView>
    </Stack>
  );
}

function CreateOrganization() {
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const qc = useQueryClient();
  const navigate = useNavigate();
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/v1/organizations', { body: { name, ...(slug ? { slug } : {}) } })).then((r) => r.data),
    onSuccess: (org) => {
      qc.invalidateQueries({ queryKey: ['organizations'] });
      navigate(`/orgs/${org.id}/projects`);
    },
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <Stack gap="xs" maw={520}>
        <Title order={2} size="h4">
          Create an organization
        </Title>
        <Group align="flex-start" grow preventGrowOverflow={false} wrap="wrap">
          <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(create.error, 'name')} required />
          <TextInput
            label="Slug (optional)"
            value={slug}
            onChange={(e) => setSlug(e.currentTarget.value)}
            error={fieldError(create.error, 'slug')}
            description="Defaults to the name, slugified"
          />
        </Group>
        <ProblemAlert error={unclaimed(create.error, ['name', 'slug'])} />
        <Button type="submit" loading={create.isPending} w="fit-content">
          Create organization
        </Button>
      </Stack>
    </form>
  );
}
