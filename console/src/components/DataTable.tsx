import { useMemo, useState, type ReactNode } from 'react';
import { Group, Pagination, ScrollArea, Table, Text, UnstyledButton, VisuallyHidden } from '@mantine/core';

export interface Column<T> {
  key: string;
  header: string;
  render: (row: T) => ReactNode;
  /** When set, the column sorts by this value. */
  sortValue?: (row: T) => string | number | null | undefined;
}

/**
 * DataTable is a table with sortable columns (click or Enter on a header) and client-side
 * paging. For the API's cursor-paged lists, pass the loaded rows and put a CursorPager under
 * it. The caption names the table for screen readers.
 */
export function DataTable<T>({
  caption,
  columns,
  rows,
  rowKey,
  pageSize = 20,
  initialSort,
}: {
  caption: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string;
  pageSize?: number;
  initialSort?: { key: string; dir: 'asc' | 'desc' };
}) {
  const [sort, setSort] = useState(initialSort);
  const [page, setPage] = useState(1);
  const sorted = useMemo(() => {
    const col = columns.find((c) => c.key === sort?.key);
    if (!col?.sortValue) return rows;
    const v = col.sortValue;
    const out = [...rows].sort((a, b) => {
      const x = v(a) ?? '';
      const y = v(b) ?? '';
      return x < y ? -1 : x > y ? 1 : 0;
    });
    return sort?.dir === 'desc' ? out.reverse() : out;
  }, [rows, columns, sort]);
  const pages = Math.max(1, Math.ceil(sorted.length / pageSize));
  const current = Math.min(page, pages);
  const visible = sorted.slice((current - 1) * pageSize, current * pageSize);
  const toggle = (key: string) =>
    setSort((s) => (s?.key === key ? { key, dir: s.dir === 'asc' ? 'desc' : 'asc' } : { key, dir: 'asc' }));
  return (
    <>
      <ScrollArea type="auto">
        <Table striped highlightOnHover verticalSpacing="xs" miw={480} style={{ whiteSpace: 'nowrap' }}>
          <VisuallyHidden component="caption">{caption}</VisuallyHidden>
          <Table.Thead>
            <Table.Tr>
              {columns.map((c) => (
                <Table.Th
                  key={c.key}
                  aria-sort={sort?.key === c.key ? (sort.dir === 'asc' ? 'ascending' : 'descending') : undefined}
                >
                  {c.sortValue ? (
                    <UnstyledButton onClick={() => toggle(c.key)} fw={700} fz="sm">
                      {c.header}
                      {sort?.key === c.key ? (sort.dir === 'asc' ? ' ▲' : ' ▼') : ''}
                    </UnstyledButton>
                  ) : (
                    c.header
                  )}
                </Table.Th>
              ))}
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {visible.map((r) => (
              <Table.Tr key={rowKey(r)}>
                {columns.map((c) => (
                  <Table.Td key={c.key}>{c.render(r)}</Table.Td>
                ))}
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </ScrollArea>
      {pages > 1 && (
        <Group justify="space-between" mt="sm">
          <Text size="sm" c="dimmed">
            {sorted.length} rows
          </Text>
          <Pagination total={pages} value={current} onChange={setPage} size="sm" aria-label={`${caption} pages`} />
        </Group>
      )}
    </>
  );
}
