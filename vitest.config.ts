import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['engine/**/*.test.ts', 'evaluation/**/*.test.ts'],
    // Vitest's default on n cores is n - 1 files at once: one at a time on 2 cores. Most
    // files spend their time waiting on the processes they start (git, tron, workers,
    // servers), so on 2 cores two at once roughly halve a run (issue #20's figures).
    maxWorkers: Math.max(2, availableParallelism()),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    setupFiles: ['engine/testing/state-home.ts', 'engine/testing/scrub-env.ts'],
  },
});
