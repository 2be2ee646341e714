import { useState, type ReactNode } from 'react';
import { Button, Group, Modal, Stack, Text, type ButtonProps } from '@mantine/core';
import type { OperationId } from '../api/permissions';
import { GatedButton } from './GatedButton';
import { ProblemAlert } from './ProblemAlert';

/**
 * ConfirmButton guards a destructive action: it opens a dialog naming the consequence, and
 * runs onConfirm only on the dialog's confirm button. A refusal stays in the dialog as a
 * ProblemAlert. With op, the button is gated on that operation's x-permission.
 */
export function ConfirmButton({
  op,
  onConfirm,
  children,
  title,
  message,
  confirmLabel,
  color = 'red',
  ...rest
}: ButtonProps & {
  op?: OperationId;
  onConfirm: () => Promise<unknown>;
  children: ReactNode;
  title: string;
  message: ReactNode;
  confirmLabel?: string;
}) {
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const start = () => {
    setError(null);
    setOpen(true);
  };
  const confirm = async () => {
    setBusy(true);
    setError(null);
    try {
      await onConfirm();
      setOpen(false);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      {op ? (
        <GatedButton op={op} color={color} variant="light" onClick={start} {...rest}>
          {children}
        </GatedButton>
      ) : (
        <Button color={color} variant="light" onClick={start} {...rest}>
          {children}
        </Button>
      )}
      <Modal opened={open} onClose={() => setOpen(false)} title={title} centered closeButtonProps={{ 'aria-label': 'Close' }}>
        <Stack>
          <Text size="sm">{message}</Text>
          <ProblemAlert error={error} />
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setOpen(false)}>
              Cancel
            </Button>
            <Button color={color} loading={busy} onClick={confirm} data-autofocus>
              {confirmLabel ?? title}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </>
  );
}
