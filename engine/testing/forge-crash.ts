/**
 * The crash sweep every forge's end-to-end proof runs (engine/forge/crash.e2e.test.ts for
 * GitHub, gitlab-crash.e2e.test.ts for GitLab): `tron start` killed with SIGKILL right after
 * the forge answered its n-th write — every n — and after a spread of its reads (the first,
 * the last and two between, or the first and the last; every one with
 * `TRON_CRASH_SWEEP=full`), then started again
 * until a run ends by itself. The forge's file gives the scenario and what "once" means
 * there; this file gives the starts and the sweep.
 */
import { execa, type ResultPromise } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { BIN } from './crash.ts';
import { GIT_IDENTITY_ENV } from './repo.ts';

/** What tron's call was, as the forge's test server counts it. */
export type After = 'write' | 'read';

/** One scenario's end: how many writes and reads tron made, how each start ended, and its project. */
export interface KillOutcome {
  writes: number;
  reads: number;
  exits: (number | string | undefined)[];
  /** trunk's `greeting.txt` on the remote, where the block landed. */
  landedGreeting(): Promise<string>;
  cleanup(): Promise<void>;
}

/**
 * `tron start` in `dir`, started again after each SIGKILL (three starts at most) until a run
 * ends by itself; `running` is told each start, so that the server's hook can kill it.
 */
export async function startUntilUnkilled(
  dir: string,
  env: Record<string, string>,
  running: (child: ResultPromise) => void,
): Promise<KillOutcome['exits']> {
  const exits: KillOutcome['exits'] = [];
  for (let i = 0; i < 3; i++) {
    const child = execa('node', [BIN, 'start', '--repo', dir], {
      reject: false,
      stdin: 'ignore',
      env: { ...GIT_IDENTITY_ENV, ...env },
      timeout: 120_000,
    });
    running(child);
    const r = await child;
    exits.push(r.signal ?? r.exitCode);
    if (!r.signal) break;
  }
  return exits;
}

/** What a sweep needs of a forge's project: its repository and environment, the remote, and its end. */
export interface SweptProject {
  repo: { dir: string };
  env: Record<string, string>;
  bare: { git(...args: string[]): Promise<string> };
  cleanup(): Promise<void>;
}

/**
 * One scenario of a sweep: the project `make` builds, its server telling `onServed` of every
 * call it answers, `prepare`d (issues opened, CI set up); then `tron start`, killed right
 * after tron's `killAt`-th call of `after` (none: undefined), as `calls` tells tron's writes
 * and reads from the rest, and started again until a run ends by itself.
 */
export async function killedRun<S, P extends SweptProject>(
  killAt: number | undefined,
  after: After,
  calls: { write(s: S): boolean; read(s: S): boolean },
  make: (onServed: (s: S) => void) => Promise<P>,
  prepare: (p: P) => void | Promise<void>,
): Promise<KillOutcome & { p: P }> {
  let child: ResultPromise | undefined;
  let writes = 0;
  let reads = 0;
  const p = await make((s) => {
    if (calls.read(s) && ++reads === killAt && after === 'read') child?.kill('SIGKILL');
    if (calls.write(s) && ++writes === killAt && after === 'write') child?.kill('SIGKILL');
  });
  await prepare(p);
  const exits = await startUntilUnkilled(p.repo.dir, p.env, (c) => {
    child = c;
  });
  return { p, writes, reads, exits, landedGreeting: () => p.bare.git('show', 'main:greeting.txt'), cleanup: () => p.cleanup() };
}

/** `k` of the calls 1…total, evenly from the first to the last (each once). */
function spread(total: number, k: number): number[] {
  return [...new Set(Array.from({ length: k }, (_, i) => (i === k - 1 ? total : Math.max(1, Math.floor((i * total) / (k - 1))))))];
}

/** The sweep's two tests, named in the forge's words. */
export function killSweeps<O extends KillOutcome>(o: {
  /** The describe's title, e.g. "killed at every forge call". */
  title: string;
  /**
   * What the forge calls a change request and a comment, and itself: "pull request",
   * "comment", "the forge". No change request: an intake source that lands nothing (Linear).
   */
  change?: string;
  comment: string;
  forge: string;
  /** The fewest writes and reads a whole run makes (default: a forge's in PR mode, 5 and 8). */
  writes?: number;
  reads?: number;
  /**
   * How many of its reads a run is killed after (evenly, from the first to the last; every
   * one with `TRON_CRASH_SWEEP=full`): 4 by default. A read changes nothing on the forge, so
   * a kill after it is a kill before the next write but for what tron keeps of the read;
   * the intake and progress every forge shares are swept at four by GitHub's file, and a
   * forge whose own reads are its list and lookup calls may take the first and the last.
   */
  readPoints?: number;
  /** Killed after tron's `killAt`-th call of `after` (none: undefined), then started again. */
  scenario(killAt: number | undefined, after?: After): Promise<O>;
  /** The block landed once, through one change request, and no comment twice. */
  expectOnce(outcome: O, n?: number, after?: After): void;
}): void {
  describe(o.title, () => {
    // The run killed nowhere, made once for both tests (they only read it): how many writes and reads a whole run makes.
    let clean: Promise<O> | undefined;
    const cleanRun = () => {
      clean ??= o.scenario(undefined);
      return clean;
    };
    afterAll(async () => {
      await (await clean?.catch(() => undefined))?.cleanup();
    });
    const killedAt = async (n: number, after: After) => {
      const killed = await o.scenario(n, after);
      try {
        expect(killed.exits[0], `killed after ${after} ${n}`).toBe('SIGKILL');
        o.expectOnce(killed, n, after);
        expect(await killed.landedGreeting()).toBe('hello');
      } finally {
        await killed.cleanup();
      }
    };

    const once = o.change ? `opens one ${o.change} per block` : 'lands once';
    it(`${once} and posts no ${o.comment} twice, wherever tron is killed`, { timeout: 600_000 }, async () => {
      const clean = await cleanRun();
      o.expectOnce(clean);
      expect(await clean.landedGreeting()).toBe('hello');
      // The malformed issue's comment, the started comment, the change request, the landed comment, closing the issue.
      expect(clean.writes).toBeGreaterThanOrEqual(o.writes ?? 5);
      for (let n = 1; n <= clean.writes; n++) await killedAt(n, 'write');
    });

    it(`${once} and posts no ${o.comment} twice when tron is killed right after it read ${o.forge}`, {
      timeout: 600_000,
    }, async () => {
      const total = (await cleanRun()).reads;
      // The intake's list and lookups, the comment lookups, the change request's lookup, its checks and reviews.
      expect(total).toBeGreaterThanOrEqual(o.reads ?? 8);
      const points =
        process.env.TRON_CRASH_SWEEP === 'full' ? Array.from({ length: total }, (_, i) => i + 1) : spread(total, o.readPoints ?? 4);
      for (const n of points) await killedAt(n, 'read');
    });
  });
}
