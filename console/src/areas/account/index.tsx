// The signed-in user's account (user scope): profile and email, password, sessions, second
// factor (TOTP) and passkeys — through the /api/auth routes, as the hosted account page does.
import { Anchor, Stack, Text, Title } from '@mantine/core';
import { Profile, ChangeEmail, ChangePassword } from './Profile';
import { Sessions } from './Sessions';
import { TwoFactor } from './TwoFactor';
import { Passkeys } from './Passkeys';

export default function Account() {
  return (
    <Stack gap="xl">
      <Stack gap={4}>
        <Title order={1}>Your account</Title>
        <Text size="sm">
          The same settings are on the hosted <Anchor href="/api/auth/account">account page</Anchor>.
        </Text>
      </Stack>
      <Profile />
      <ChangeEmail />
      <ChangePassword />
      <Sessions />
      <TwoFactor />
      <Passkeys />
    </Stack>
  );
}
