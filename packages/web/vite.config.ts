import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/** `pnpm dev` proxies the API to a server on :3000 (`pnpm start`); the server serves the build. */
export default defineConfig({
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 2_000 },
  server: { proxy: { '/trpc': 'http://127.0.0.1:3000' } },
});
