// Organization settings (org scope): rename (name, slug) and archive. Restoring an archived
// organization is on the Organizations page (an archived one has no settings to open).
import { useState } from 'react';
import { Group, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useNavigate } from 'react-router';
import { api, unwrap } from '../../api/client';
import { useCan, useOrgId } from '../../lib/org';
import { when } from '../../lib/format';
import { QueryView } from '../../components/States';
import { ProblemAlert } from '../../components/ProblemAlert';
import { ConfirmButton } from '../../components/ConfirmButton';
import { GatedButton } from '../../components/GatedButton';
import { fieldError, unclaimed } from '../../components/forms';

export default function OrganizationSettings() {
  const orgId = useOrgId()!;
  const org = useQuery({
    queryKey: ['organizations', orgId],
    queryFn: () => unwrap(api.GET('/api/v1/organizations/{organizationId}', { params: { path: { organizationId: orgId } } })).then((r) => r.data),
  });
  const qc = useQueryClient();
  const navigate = useNavigate();
  return (
    <QueryView query={org}>
      {(o) => (
        <Stack>
          <Title order={1}>Organization settings</Title>
          <Text size="sm" c="dimmed">
            {o.id} · your role: {o.role} · created {when(o.createdAt)}
          </Text>
          <Rename orgId={orgId} name={o.name} slug={o.slug} />
          <Title order={2} size="h4">
            Archive
          </Title>
          <Text size="sm">Archiving hides the organization, its projects and their history until an owner restores it. Nothing is deleted.</Text>
          <ConfirmButton
            op="archiveOrganization"
            w="fit-content"
            title={`Archive ${o.name}`}
            message="Everything under it answers 404 until restored, and its API keys stop working."
            confirmLabel="Archive organization"
            onConfirm={() =>
              unwrap(api.DELETE('/api/v1/organizations/{organizationId}', { params: { path: { organizationId: orgId } } })).then(() => {
                qc.invalidateQueries({ queryKey: ['organizations'] });
                navigate('/organizations');
              })
            }
          >
            Archive organization
          </ConfirmButton>
        </Stack>
      )}
    </QueryView>
  );
}

function Rename({ orgId, name: current, slug: currentSlug }: { orgId: string; name: string; slug: string }) {
  const [name, setName] = useState(current);
  const [slug, setSlug] = useState(currentSlug);
  const can = useCan()('updateOrganization');
  const qc = useQueryClient();
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PATCH('/api/v1/organizations/{organizationId}', {
          params: { path: { organizationId: orgId } },
          body: { ...(name !== current ? { name } : {}), ...(slug !== currentSlug ? { slug } : {}) },
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['organizations'] }),
  });
  if (!can.allowed) return null;
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <Stack gap="xs" maw={520}>
        <Title order={2} size="h4">
          Rename
        </Title>
        <Group align="flex-start" grow preventGrowOverflow={false} wrap="wrap">
          <TextInput label="Organization name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(save.error, 'name')} />
          <TextInput label="Organization slug" value={slug} onChange={(e) => setSlug(e.currentTarget.value)} error={fieldError(save.error, 'slug')} />
        </Group>
        <ProblemAlert error={unclaimed(save.error, ['name', 'slug'])} />
        <GatedButton op="updateOrganization" type="submit" loading={save.isPending} disabled={name === current && slug === currentSlug} w="fit-content">
          Save
        </GatedButton>
      </Stack>
    </form>
  );
}
