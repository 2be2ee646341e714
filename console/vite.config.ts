import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The console is served by the Go binary at /console/ (server/consoleui). Output goes to
// console/dist; the Makefile copies it into server/consoleui/dist, which is embedded.
export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // Everything is a file: the CSP allows no inline script and no data: script.
    assetsInlineLimit: 0,
    sourcemap: false,
    chunkSizeWarningLimit: 800,
  },
  server: {
    // `npm run dev` proxies the API to a local `make run`.
    proxy: { '/api': 'http://localhost:8080' },
  },
});
