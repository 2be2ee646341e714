import { useState } from 'react';
import { MultiSelect, Stack, TextInput } from '@mantine/core';
import type { components } from '../../api/schema.gen';
import { EnvironmentSelect } from '../../lib/projectEnvironments';
import { fieldErrors } from '../../components/forms';
import { eventTypes } from './eventTypes';

export type Endpoint = components['schemas']['WebhookEndpoint'];
export interface EndpointFields {
  url: string;
  description: string;
  environmentId: string;
  eventTypes: string[];
}

export const fields = ['url', 'description', 'environmentId', 'eventTypes'];

export function useEndpointFields(e?: Endpoint) {
  return useState<EndpointFields>({
    url: e?.url ?? '',
    description: e?.description ?? '',
    environmentId: e?.environmentId ?? '',
    eventTypes: e?.eventTypes ?? ['*'],
  });
}

/** EndpointFieldsForm: the fields of create and edit, with the API's errors beside them. */
export function EndpointFieldsForm({
  projectId,
  value,
  onChange,
  error,
  idPrefix,
}: {
  projectId: string;
  value: EndpointFields;
  onChange: (v: EndpointFields) => void;
  error: unknown;
  idPrefix: string;
}) {
  const fe = fieldErrors(error);
  const typesError = Object.entries(fe).find(([k]) => k.startsWith('eventTypes'))?.[1];
  return (
    <Stack gap="xs">
      <TextInput
        id={`${idPrefix}-url`}
        label="URL"
        description="https only; private and loopback addresses are refused"
        value={value.url}
        onChange={(e) => onChange({ ...value, url: e.currentTarget.value })}
        error={fe.url}
        required
      />
      <TextInput
        id={`${idPrefix}-description`}
        label="Description (optional)"
        value={value.description}
        onChange={(e) => onChange({ ...value, description: e.currentTarget.value })}
        error={fe.description}
        maxLength={500}
      />
      <EnvironmentSelect
        projectId={projectId}
        label="Events of"
        allLabel="Every environment"
        value={value.environmentId}
        onChange={(v) => onChange({ ...value, environmentId: v })}
        error={fe.environmentId}
      />
      <MultiSelect
        id={`${idPrefix}-types`}
        label="Event types"
        description="* is every type, now and later"
        data={['*', ...eventTypes]}
        value={value.eventTypes}
        onChange={(v) => onChange({ ...value, eventTypes: v.includes('*') && !value.eventTypes.includes('*') ? ['*'] : v.filter((x) => x !== '*' || v.length === 1) })}
        searchable
        error={typesError}
        comboboxProps={{ withinPortal: true }}
      />
    </Stack>
  );
}
