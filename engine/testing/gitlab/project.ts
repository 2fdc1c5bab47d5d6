/**
 * A tron project on GitLab, for tests: a bare repository served by `git daemon` (the
 * `[remote]`), the test GitLab server over that same repository (`[forge] kind =
 * "gitlab"`, `[intake]`), and a project cloned from it with no block files — its work
 * comes from issues. `ci()` installs a post-receive hook that plays an external CI: on
 * every push of a `tron/*` branch it runs a script in a checkout of the pushed sha and
 * reports it as a commit status (`POST /projects/:id/statuses/:sha`), which GitLab turns
 * into that sha's pipeline.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configFile, project } from '../project.ts';
import { type BareRemote, makeBareRemote, type ServedRemote, serveDaemon, publishTo } from '../remote-server.ts';
import type { TestRepo } from '../repo.ts';
import { writeBuilder } from '../workers.ts';
import { type GitLabServer, type Seen, startGitLabServer } from './server.ts';

export interface GitLabProject {
  repo: TestRepo;
  bare: BareRemote;
  served: ServedRemote;
  gl: GitLabServer;
  /** A scratch folder outside the repository (the builder may write there). */
  out: string;
  /** The environment tron runs with (with the token in GITLAB_TOKEN). */
  env: Record<string, string>;
  /** External CI: job `name` runs `script` on each pushed tron/* head; exit 0 is success, its output the job's log. */
  ci(name: string, script: string): Promise<void>;
  cleanup(): Promise<void>;
}

export async function gitlabProject(opts: {
  builder: (out: string) => string;
  /** More lines of [forge]. */
  forge?: string;
  builderEnv?: string[];
  /** More lines of [intake] (e.g. poll = "100ms"). */
  intake?: string;
  files?: Record<string, string> | ((out: string) => Record<string, string>);
  onServed?: (seen: Seen) => void;
}): Promise<GitLabProject> {
  const bare = await makeBareRemote();
  let served: ServedRemote | undefined;
  let gl: GitLabServer | undefined;
  let out: string | undefined;
  const cleanup = async () => {
    await gl?.close();
    await served?.stop().catch(() => undefined);
    await Promise.all([bare.cleanup(), out && rm(out, { recursive: true, force: true })]);
  };
  try {
    served = await serveDaemon(bare);
    gl = await startGitLabServer({ gitDir: bare.dir, ...(opts.onServed && { onServed: opts.onServed }) });
    out = await mkdtemp(join(tmpdir(), 'tron-gitlab-out-'));
    const builder = writeBuilder(out, opts.builder(out));
    const passed = opts.builderEnv ? `env = ${JSON.stringify(opts.builderEnv)}\n` : '';
    const workers = `[workers.builder]\nadapter = "command"\ncommand = ["${builder}"]\n${passed}\n[workers.reviewer]\nadapter = "command"\ncommand = ["sh", "-c", "cat > /dev/null; echo '>>APPROVE'"]\n${passed}`;
    const extra = `[sandbox]\nmode = "off"\n\n[remote]\nbackoff = "100ms"\n\n[forge]\nkind = "gitlab"\nrepo = "${gl.path}"\napi_url = "${gl.url}"\nbackoff = "50ms"\n${opts.forge ?? ''}\n[intake]\nlabel = "tron"\n${opts.intake ?? ''}`;
    const repo = await project({
      blocks: {},
      config: configFile({ workers, extra }),
      ...(opts.files && { files: typeof opts.files === 'function' ? opts.files(out) : opts.files }),
    });
    await publishTo(repo, bare, served);
    const jobs: { name: string; script: string }[] = [];
    const [server, scratch] = [gl, out];
    return {
      repo,
      bare,
      served,
      gl,
      out,
      env: { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GITLAB_TOKEN: gl.token },
      ci: (name, script) => {
        jobs.push({ name, script });
        return installCi(bare, server, jobs, scratch);
      },
      cleanup,
    };
  } catch (err) {
    await cleanup().catch(() => undefined);
    throw err;
  }
}

/** External CI as a post-receive hook: each job's result on each pushed tron/* sha, as a commit status. */
async function installCi(
  bare: BareRemote,
  gl: GitLabServer,
  jobs: readonly { name: string; script: string }[],
  scratch: string,
): Promise<void> {
  const hook = `#!/usr/bin/env node
const { execFileSync, spawnSync } = require('node:child_process');
const { mkdtempSync, rmSync } = require('node:fs');
const lines = require('node:fs').readFileSync(0, 'utf8').trim().split('\\n');
(async () => {
  for (const line of lines) {
    const [, sha, ref] = line.split(' ');
    if (!ref || !ref.startsWith('refs/heads/tron/') || /^0+$/.test(sha)) continue;
    for (const job of ${JSON.stringify(jobs)}) {
      const dir = mkdtempSync(${JSON.stringify(join(scratch, 'ci-'))});
      execFileSync('git', ['--work-tree', dir, 'checkout', '-f', sha, '--', '.'], { env: { ...process.env, GIT_INDEX_FILE: dir + '.index' } });
      const run = spawnSync('sh', ['-c', job.script], { cwd: dir, encoding: 'utf8' });
      rmSync(dir, { recursive: true, force: true });
      rmSync(dir + '.index', { force: true });
      await fetch(${JSON.stringify(`${gl.url}/projects/${gl.projectId}/statuses/`)} + sha, {
        method: 'POST',
        headers: { 'private-token': ${JSON.stringify(gl.token)}, 'content-type': 'application/json' },
        body: JSON.stringify({ name: job.name, ref: ref.slice('refs/heads/'.length), state: run.status === 0 ? 'success' : 'failed',
          description: (run.stdout || '') + (run.stderr || '') }),
      });
    }
  }
})();
`;
  await bare.hook('post-receive', hook);
}
