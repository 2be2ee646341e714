// Formatting for the analytics and billing views.

/** money formats an amount in a currency's minor units (4900 usd → "$49.00"). */
export function money(minor: number, currency: string): string {
  try {
    const f = new Intl.NumberFormat(undefined, { style: 'currency', currency: currency.toUpperCase() });
    const digits = f.resolvedOptions().maximumFractionDigits ?? 2;
    return f.format(minor / 10 ** digits);
  } catch {
    return `${minor} ${currency} (minor units)`;
  }
}

/** revenue formats a currency → minor units map ("—" when empty). */
export function revenue(r: Record<string, number> | undefined): string {
  const entries = Object.entries(r ?? {});
  if (entries.length === 0) return '—';
  return entries.map(([c, v]) => money(v, c)).join(', ');
}

export function num(n: number): string {
  return new Intl.NumberFormat().format(n);
}

export function when(ts: string | null | undefined): string {
  return ts ? new Date(ts).toLocaleString() : '—';
}
