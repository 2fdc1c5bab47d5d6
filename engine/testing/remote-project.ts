/**
 * A tron project whose trunk lives on a served remote ([remote]): the crash project's
 * three blocks and honest builder, a bare repository served on 127.0.0.1 (git daemon or
 * smart HTTP) holding its trunk, and the project as a clone of it with `origin` pointing
 * there. Optionally a teammate — a second clone — pushes to the remote's trunk while the
 * first stack is tested in the lane, between that stack and its landing.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crashProject } from './crash.ts';
import { NODE_RUNNER, configFile, makeProject } from './project.ts';
import { approvingWorkers, writeBuilder } from './workers.ts';
import { tmpdir } from 'node:os';
import { makeBareRemote, serveDaemon, type BareRemote, type ServedRemote, publishTo } from './remote-server.ts';
import { makeRepo, type TestRepo } from './repo.ts';

export interface RemoteProject {
  repo: TestRepo;
  bare: BareRemote;
  served: ServedRemote;
  /** The teammate's clone (when asked for): its commit on the remote's trunk, once pushed, is in `mate.txt`'s history. */
  mate?: TestRepo;
  /** The environment tron runs with: no global or system git config of the machine. */
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

/**
 * The test command with a teammate: the first time it runs in the lane's checkout, the
 * teammate's clone pushes one commit to the remote's trunk (plain git, straight to the
 * bare repository), so the landing that follows finds trunk moved.
 */
export function runnerWithTeammate(mate: string, bare: string): string {
  return `const { existsSync, writeFileSync } = require('node:fs');
const { basename } = require('node:path');
const { execFileSync } = require('node:child_process');
if (basename(process.cwd()) === '_lane' && !existsSync(${JSON.stringify(join(mate, '.pushed'))})) {
  writeFileSync(${JSON.stringify(join(mate, '.pushed'))}, '');
  const git = (...args) => execFileSync('git', ['-c', 'user.name=Mate', '-c', 'user.email=mate@example.invalid', ...args], {
    cwd: ${JSON.stringify(mate)},
    env: { PATH: process.env.PATH, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    stdio: 'ignore',
  });
  git('fetch', '-q', ${JSON.stringify(bare)}, '+main:refs/remotes/origin/main');
  git('reset', '-q', '--hard', 'origin/main');
  writeFileSync(${JSON.stringify(join(mate, 'mate.txt'))}, 'a teammate was here\\n');
  git('add', 'mate.txt');
  git('commit', '-q', '-m', 'Teammate: mate.txt');
  git('push', '-q', ${JSON.stringify(bare)}, 'HEAD:main');
}
${NODE_RUNNER}`;
}

export async function remoteProject(
  opts: {
    teammate?: boolean;
    remote?: string;
    served?: (bare: BareRemote) => Promise<ServedRemote>;
    /** Instead of the crash project: one block `sly` built by this script, given the bare repository's path. */
    builder?: (bare: string) => string;
  } = {},
): Promise<RemoteProject> {
  const bare = await makeBareRemote();
  // Every move of the remote's trunk is in its reflog: a force-push would show there.
  await bare.git('config', 'core.logAllRefUpdates', 'always');
  const served = await (opts.served ?? serveDaemon)(bare);
  const slyDir = opts.builder ? await mkdtemp(join(tmpdir(), 'tron-sly-')) : undefined;
  const repo =
    opts.builder && slyDir
      ? await makeProject({
          blocks: { sly: {} },
          config: configFile({ workers: approvingWorkers(writeBuilder(slyDir, opts.builder(bare.dir))) }),
        })
      : await crashProject();
  let mate: TestRepo | undefined;
  if (opts.teammate) {
    mate = await makeRepo({});
    await writeFile(join(repo.dir, 'test.js'), runnerWithTeammate(mate.dir, bare.dir));
  }
  await writeFile(
    join(repo.dir, '.tron', 'config.toml'),
    `${await repo.read('.tron/config.toml')}\n[sandbox]\nmode = "off"\n\n${opts.remote ?? '[remote]\nbackoff = "100ms"\nretries = 50\n'}`,
  );
  await repo.commitAll('tron: with a remote');
  await publishTo(repo, bare, served);
  return {
    repo,
    bare,
    served,
    ...(mate && { mate }),
    env: { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    async cleanup() {
      await served.stop().catch(() => undefined);
      await Promise.all([repo.cleanup(), bare.cleanup(), mate?.cleanup(), slyDir && rm(slyDir, { recursive: true, force: true })]);
    },
  };
}
