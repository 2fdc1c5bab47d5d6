/**
 * A tron project whose issues are a Linear team's, for tests: the test Linear server
 * (`[intake] source = "linear"`, its `api_url`), a bare repository served by `git daemon`
 * as the `[remote]` every landing is pushed to, and a project cloned from it with no
 * block files and no `[forge]` — its work comes from Linear, its code lands on the remote.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configFile, project } from '../project.ts';
import { type BareRemote, makeBareRemote, type ServedRemote, serveDaemon, publishTo } from '../remote-server.ts';
import type { TestRepo } from '../repo.ts';
import { approvingWorkers, writeBuilder } from '../workers.ts';
import { type LinearServer, type Seen, startLinearServer } from './server.ts';

export interface LinearProject {
  repo: TestRepo;
  bare: BareRemote;
  linear: LinearServer;
  /** A scratch folder outside the repository (the builder may write there). */
  out: string;
  /** The environment tron runs with (with the key in LINEAR_API_KEY). */
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

export async function linearProject(opts: {
  builder: (out: string) => string;
  /** More lines of [intake] (e.g. state = "Todo"). */
  intake?: string;
  /** Told of each request as the server serves it. */
  onServed?: (seen: Seen) => void;
}): Promise<LinearProject> {
  const bare = await makeBareRemote();
  let served: ServedRemote | undefined;
  let linear: LinearServer | undefined;
  let out: string | undefined;
  const cleanup = async () => {
    await linear?.close();
    await served?.stop().catch(() => undefined);
    await Promise.all([bare.cleanup(), out && rm(out, { recursive: true, force: true })]);
  };
  try {
    [served, linear, out] = await Promise.all([
      serveDaemon(bare),
      startLinearServer(opts.onServed ? { onServed: opts.onServed } : {}),
      mkdtemp(join(tmpdir(), 'tron-linear-out-')),
    ]);
    const intake = ['[intake]', 'source = "linear"', `team = "${linear.team}"`, `api_url = "${linear.url}"`, 'backoff = "50ms"'];
    const extra = `[sandbox]\nmode = "off"\n\n[remote]\nbackoff = "100ms"\n\n${intake.join('\n')}\n${opts.intake ?? ''}`;
    // The builder's env list passes every LINEAR_* on: the key must not be among them all the same.
    const builder = writeBuilder(out, opts.builder(out));
    const workers = approvingWorkers(builder).replace(`command = ["${builder}"]\n`, (line) => `${line}env = ["LINEAR_*"]\n`);
    const repo = await project({ blocks: {}, config: configFile({ workers, extra }) });
    await publishTo(repo, bare, served);
    return {
      repo,
      bare,
      linear,
      out,
      env: { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', LINEAR_API_KEY: linear.key },
      cleanup,
    };
  } catch (err) {
    await cleanup().catch(() => undefined);
    throw err;
  }
}
