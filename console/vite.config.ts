import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'node:url';

/**
 * The operator console (issue 25): a static build the API serves under `/console`
 * (api/console.ts). Built once by setup (scripts/build-console.cjs), never by the API.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 1500, reportCompressedSize: false },
  logLevel: 'warn',
});
