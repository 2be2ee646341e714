import type { ReactNode } from 'react';
import { Button, Tooltip, type ButtonProps } from '@mantine/core';
import type { OperationId } from '../api/permissions';
import { useCan } from '../lib/org';

/**
 * GatedButton is a Button for an operation: enabled when the member's role grants the
 * operation's x-permission, otherwise shown disabled (still focusable) with the reason in a
 * tooltip and aria-description. hideWhenDenied leaves it out instead.
 */
export function GatedButton({
  op,
  onClick,
  children,
  hideWhenDenied,
  type = 'button',
  ...rest
}: ButtonProps & {
  op: OperationId;
  onClick?: () => void;
  children: ReactNode;
  hideWhenDenied?: boolean;
  type?: 'button' | 'submit';
}) {
  const g = useCan()(op);
  if (!g.allowed && hideWhenDenied) return null;
  if (g.allowed) {
    return (
      <Button type={type} onClick={onClick} {...rest}>
        {children}
      </Button>
    );
  }
  return (
    <Tooltip label={g.reason} withArrow events={{ hover: true, focus: true, touch: true }}>
      <Button type="button" data-disabled aria-disabled="true" aria-description={g.reason} onClick={(e) => e.preventDefault()} {...rest}>
        {children}
      </Button>
    </Tooltip>
  );
}
