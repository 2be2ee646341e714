import type { ReactNode } from 'react';
import { Box } from '@mantine/core';

/**
 * ScrollRegion scrolls a wide table sideways at phone width. It is a named, focusable region so
 * that the keyboard can scroll it (axe: scrollable-region-focusable), which Mantine's
 * Table.ScrollContainer is not when the table holds nothing focusable.
 */
export function ScrollRegion({ label, minWidth, children }: { label: string; minWidth: number; children: ReactNode }) {
  return (
    <Box role="region" aria-label={label} tabIndex={0} style={{ overflowX: 'auto' }}>
      <Box miw={minWidth}>{children}</Box>
    </Box>
  );
}
