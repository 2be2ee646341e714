import { useMemo, useState } from 'react';
import { Badge, Button, Code, Group, List, PasswordInput, Stack, Text, TextInput } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import qrcode from 'qrcode-generator';
import { api, unwrap } from '../../api/client';
import { useSession } from '../../lib/session';
import { ProblemAlert } from '../../components/ProblemAlert';
import { CopyOnce } from '../../components/CopyOnce';
import { fieldError, unclaimed } from '../../components/forms';
import { Section } from './Profile';

/**
 * QRCode draws an otpauth URI as SVG squares (qrcode-generator computes the modules; no
 * canvas, no data: URL, nothing inline for the CSP to refuse).
 */
export function QRCode({ value, label }: { value: string; label: string }) {
  const path = useMemo(() => {
    const qr = qrcode(0, 'M');
    qr.addData(value);
    qr.make();
    const n = qr.getModuleCount();
    let d = '';
    for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) if (qr.isDark(r, c)) d += `M${c + 4} ${r + 4}h1v1h-1z`;
    return { d, size: n + 8 };
  }, [value]);
  return (
    <svg role="img" aria-label={label} viewBox={`0 0 ${path.size} ${path.size}`} width={200} height={200} shapeRendering="crispEdges" data-testid="totp-qr">
      <rect width="100%" height="100%" fill="#fff" />
      <path d={path.d} fill="#000" />
    </svg>
  );
}

function Codes({ codes }: { codes: string[] }) {
  return (
    <Stack gap="xs">
      <CopyOnce label="Backup codes" value={codes.join('\n')} />
      <Text size="sm">Each backup code signs you in once when you cannot use your authenticator app.</Text>
    </Stack>
  );
}

export function TwoFactor() {
  const session = useSession();
  const qc = useQueryClient();
  const on = session.data?.user.twoFactorEnabled === true;
  const [password, setPassword] = useState('');
  const [enrolment, setEnrolment] = useState<{ uri: string; codes: string[] } | null>(null);
  const [codes, setCodes] = useState<string[] | null>(null);
  const [code, setCode] = useState('');
  const refresh = () => qc.invalidateQueries({ queryKey: ['session'] });
  const enable = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/two-factor/enable', { body: { password } })),
    onSuccess: (r) => {
      setEnrolment({ uri: r.totpURI, codes: r.backupCodes });
      setPassword('');
    },
  });
  const verify = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/two-factor/verify-totp', { body: { code } })),
    onSuccess: () => {
      setCode('');
      setEnrolment(null);
      refresh();
    },
  });
  const regenerate = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/two-factor/generate-backup-codes', { body: { password } })),
    onSuccess: (r) => {
      setCodes(r.backupCodes);
      setPassword('');
    },
  });
  const disable = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/two-factor/disable', { body: { password } })),
    onSuccess: () => {
      setPassword('');
      setCodes(null);
      refresh();
    },
  });
  const pwError = fieldError(enable.error ?? regenerate.error ?? disable.error, 'password');
  const shownError = unclaimed(enable.error ?? regenerate.error ?? disable.error, ['password']);
  const passwordField = (
    <PasswordInput
      label="Your password"
      autoComplete="current-password"
      value={password}
      onChange={(e) => setPassword(e.currentTarget.value)}
      error={pwError}
    />
  );
  return (
    <Section title="Second factor">
      <Group gap="xs">
        <Text size="sm">Authenticator app (TOTP):</Text>
        <Badge color={on ? 'teal.9' : 'gray.8'} variant="outline" data-testid="two-factor-state">
          {on ? 'on' : 'off'}
        </Badge>
      </Group>
      {enrolment ? (
        <Stack gap="xs">
          <List type="ordered" size="sm" spacing={4}>
            <List.Item>Scan the code with your authenticator app, or enter the key by hand.</List.Item>
            <List.Item>Keep the backup codes somewhere safe: they are shown once.</List.Item>
            <List.Item>Type the app&apos;s current 6-digit code to turn the factor on.</List.Item>
          </List>
          <QRCode value={enrolment.uri} label="QR code of your authenticator key" />
          <Code block style={{ wordBreak: 'break-all', whiteSpace: 'pre-wrap' }} data-testid="totp-uri">
            {enrolment.uri}
          </Code>
          <Codes codes={enrolment.codes} />
          <form
            onSubmit={(e) => {
              e.preventDefault();
              verify.mutate();
            }}
          >
            <Stack gap="xs">
              <TextInput
                label="Code from the app"
                inputMode="numeric"
                autoComplete="one-time-code"
                value={code}
                onChange={(e) => setCode(e.currentTarget.value)}
                error={fieldError(verify.error, 'code')}
                required
              />
              <ProblemAlert error={unclaimed(verify.error, ['code'])} />
              <Button type="submit" loading={verify.isPending} w="fit-content">
                Turn on
              </Button>
            </Stack>
          </form>
        </Stack>
      ) : on ? (
        <Stack gap="xs">
          {passwordField}
          <ProblemAlert error={shownError} />
          <Group gap="xs" wrap="wrap">
            <Button variant="default" onClick={() => regenerate.mutate()} loading={regenerate.isPending}>
              New backup codes
            </Button>
            <Button color="red" variant="light" onClick={() => disable.mutate()} loading={disable.isPending}>
              Turn off second factor
            </Button>
          </Group>
          <Text size="sm">New backup codes replace the old ones. Turning off also forgets the browsers you trusted.</Text>
          {codes && <Codes codes={codes} />}
        </Stack>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            enable.mutate();
          }}
        >
          <Stack gap="xs">
            <Text size="sm">Sign-ins then also ask for a code from an authenticator app.</Text>
            {passwordField}
            <ProblemAlert error={shownError} />
            <Button type="submit" loading={enable.isPending} w="fit-content">
              Set up authenticator app
            </Button>
          </Stack>
        </form>
      )}
    </Section>
  );
}
