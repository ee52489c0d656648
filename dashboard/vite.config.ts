import { defineConfig } from 'vite';

// The coordinator serves the build from its root; LEAPFROG_DASHBOARD_OUT is
// set by CMake to put it in the build tree.
export default defineConfig({
  base: './',
  build: {
    outDir: process.env.LEAPFROG_DASHBOARD_OUT ?? 'dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 2000,
  },
});
