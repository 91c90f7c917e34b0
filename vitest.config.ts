import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The native addon is loaded in forked processes; forks are the most robust pool for addons.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
