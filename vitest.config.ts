import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The longest files first, so that none starts late and runs on alone at the end of a run:
 * by the time each took in the last run (vitest's cache, as vitest's own order), else — a
 * fresh clone (CI), a new file — by the longest timeout the file gives a test, a hook or a
 * process (a file that allows a test 15 minutes takes longest; a twentieth of it is taken
 * as its time), then by size. Vitest alone orders a fresh clone by size: a small file that
 * runs half a minute (evaluation/harness.test.ts) started last, and ran on alone.
 */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const known = (spec: TestSpecification) =>
      cache.getFileTestResults(`${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`);
    const weight = new Map<TestSpecification, number>();
    const size = new Map<TestSpecification, number>();
    for (const spec of files) {
      const text = readFileSync(spec.moduleId, 'utf8');
      size.set(spec, text.length);
      const cached = known(spec);
      if (cached) {
        weight.set(spec, cached.duration);
        continue;
      }
      // A test's or hook's own timeout, `}, 900_000)`, or an option `timeout: 600_000`.
      const timeouts = [...text.matchAll(/(?:\},\s*|timeout:\s*)(\d[\d_]*)\s*[),]/g)].map((m) => Number(m[1]!.replaceAll('_', '')));
      weight.set(spec, Math.max(0, ...timeouts) / 20);
    }
    return [...files].sort(
      (a, b) =>
        Number(known(b)?.failed ?? false) - Number(known(a)?.failed ?? false) ||
        weight.get(b)! - weight.get(a)! ||
        size.get(b)! - size.get(a)!,
    );
  }
}

export default defineConfig({
  test: {
    include: ['engine/**/*.test.ts', 'evaluation/**/*.test.ts'],
    // Vitest's default on n cores is n - 1 files at once: one at a time on 2 cores. Most
    // files spend their time waiting on the processes they start (git, tron, workers,
    // servers), so on 2 cores two at once roughly halve a run (issue #20's figures), and
    // three at once use the time that two leave idle: ten files of the suite (liveness,
    // timeouts and end-to-end ones) took 71 s two at a time and 54 s three at a time
    // (CPU 60 s and 63 s). Files that keep a core busy all along gain nothing from it
    // (eight such: 56 s and 60 s).
    maxWorkers: Math.max(2, Math.ceil(availableParallelism() * 1.5)),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // A test process runs file after file (setup files run again for each): starting a
    // process and loading the engine for each of ~140 files cost ~0.3 s of CPU a file
    // (65 small files, one at a time: 36 s isolated, 18 s not). So a file leaves the
    // process as it found it: environment variables given back (vi.stubEnv is undone
    // after each test), no server, process or timer left running.
    isolate: false,
    unstubEnvs: true,
    sequence: { sequencer: LongestFirst },
    setupFiles: ['engine/testing/state-home.ts', 'engine/testing/scrub-env.ts'],
  },
});
