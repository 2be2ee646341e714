import { Alert, Button, Code, CopyButton, Group, Stack, Text } from '@mantine/core';

/**
 * CopyOnce shows a secret the API returns only once (an API key, a client secret), with a copy
 * button and the warning that it cannot be shown again.
 */
export function CopyOnce({ label, value }: { label: string; value: string }) {
  return (
    // The title in the text colour: yellow.8 on the light yellow background is under 4.5:1 (axe).
    <Alert color="yellow" variant="light" title={`${label}: shown once`} data-testid="copy-once" styles={{ title: { color: 'var(--mantine-color-text)' } }}>
      <Stack gap="xs">
        <Text size="sm">Copy it now and keep it somewhere safe. It cannot be shown again; if it is lost, make a new one.</Text>
        <Code block style={{ wordBreak: 'break-all', whiteSpace: 'pre-wrap' }} data-testid="secret-value">
          {value}
        </Code>
        <Group>
          <CopyButton value={value}>
            {({ copied, copy }) => (
              // teal.9: white on the theme's teal.8 is under 4.5:1 (axe, while "Copied" shows).
              <Button size="xs" onClick={copy} color={copied ? 'teal.9' : undefined}>
                {copied ? 'Copied' : `Copy ${label.toLowerCase()}`}
              </Button>
            )}
          </CopyButton>
        </Group>
      </Stack>
    </Alert>
  );
}
