// The initial-JavaScript budget: the scripts and module preloads dist/index.html loads before
// any lazy area, gzipped, must total at most 250 kB. Run by `npm run build` and `make check`.
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const LIMIT = 250 * 1024;
const dist = new URL('../dist/', import.meta.url);
const html = readFileSync(new URL('index.html', dist), 'utf8');
const urls = new Set();
for (const m of html.matchAll(/<script[^>]*\ssrc="([^"]+)"/g)) urls.add(m[1]);
for (const m of html.matchAll(/<link[^>]*rel="modulepreload"[^>]*href="([^"]+)"/g)) urls.add(m[1]);
if (urls.size === 0) throw new Error('budget: index.html loads no script');
let total = 0;
for (const u of urls) {
  const file = u.replace(/^\/console\//, '');
  const size = gzipSync(readFileSync(new URL(file, dist)), { level: 9 }).length;
  total += size;
  console.log(`budget: ${file} ${(size / 1024).toFixed(1)} kB gzip`);
}
console.log(`budget: initial JavaScript ${(total / 1024).toFixed(1)} kB gzip of ${LIMIT / 1024} kB`);
if (total > LIMIT) {
  console.error('budget: over the 250 kB gzip budget for initial JavaScript');
  process.exit(1);
}
