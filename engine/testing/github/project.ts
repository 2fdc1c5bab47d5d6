/**
 * A tron project on a forge, for tests: a bare repository served by `git daemon` (the
 * `[remote]`), the test GitHub server over that same repository (`[forge]`, `[intake]`),
 * and a project cloned from it with no block files — its work comes from issues. The
 * builder is a command script the test writes; `ci()` installs a post-receive hook on the
 * remote that plays hosted CI: on every push of a `tron/*` branch it runs a check on the
 * pushed sha and reports it as a check run through the API, as a CI app would.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configFile, project } from '../project.ts';
import { makeBareRemote, serveDaemon, type BareRemote, type ServedRemote, publishTo } from '../remote-server.ts';
import type { TestRepo } from '../repo.ts';
import { writeBuilder } from '../workers.ts';
import { startGitHubServer, type GitHubServer, type Seen } from './server.ts';

export interface ForgeProject {
  repo: TestRepo;
  bare: BareRemote;
  served: ServedRemote;
  gh: GitHubServer;
  /** A scratch folder outside the repository (the builder may write there). */
  out: string;
  /** The environment tron runs with (with the token). */
  env: Record<string, string>;
  /**
   * Hosted CI: check `name` runs on each pushed tron/* head. `script` is a shell command
   * run in a checkout of the sha; exit 0 is success, and its output is the check's text.
   * Each call adds one more (in order); `token` reports it as another app (`gh.appToken`).
   */
  ci(name: string, script: string, token?: string): Promise<void>;
  cleanup(): Promise<void>;
}

/** The test env: no global git config; the forge token as tron would find it. */
function envOf(gh: GitHubServer): Record<string, string> {
  return { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GITHUB_TOKEN: gh.token };
}

export async function forgeProject(opts: {
  builder: (out: string) => string;
  forge?: string;
  /** The builder's `env` pass-through list (and the reviewer's, unless `reviewerEnv`). */
  builderEnv?: string[];
  /** The reviewer's `env` pass-through list (default `builderEnv`). */
  reviewerEnv?: string[];
  /** More lines of [intake] (e.g. poll = "100ms"). */
  intake?: string;
  /** `[sandbox] mode` (default "off": the builders of these tests write to the test's own folder). */
  sandbox?: string;
  /** More files of the project's first commit (or made from `out`: a test that writes there). */
  files?: Record<string, string> | ((out: string) => Record<string, string>);
  /** Sees each API request once answered (the crash tests kill tron there). */
  onServed?: (seen: Seen) => void;
}): Promise<ForgeProject> {
  const bare = await makeBareRemote();
  let served: ServedRemote | undefined;
  let gh: GitHubServer | undefined;
  let out: string | undefined;
  // Whatever was made so far, also when the set-up fails half-way (the project goes with the test: project()).
  const cleanup = async () => {
    await gh?.close();
    await served?.stop().catch(() => undefined);
    await Promise.all([bare.cleanup(), out && rm(out, { recursive: true, force: true })]);
  };
  try {
    served = await serveDaemon(bare);
    gh = await startGitHubServer({ gitDir: bare.dir, ...(opts.onServed && { onServed: opts.onServed }) });
    out = await mkdtemp(join(tmpdir(), 'tron-forge-out-'));
    const builder = writeBuilder(out, opts.builder(out));
    const passed = (list: string[] | undefined) => (list ? `env = ${JSON.stringify(list)}\n` : '');
    const workers = `[workers.builder]\nadapter = "command"\ncommand = ["${builder}"]\n${passed(opts.builderEnv)}\n[workers.reviewer]\nadapter = "command"\ncommand = ["sh", "-c", "cat > /dev/null; echo '>>APPROVE'"]\n${passed(opts.reviewerEnv ?? opts.builderEnv)}`;
    const extra = `[sandbox]\nmode = "${opts.sandbox ?? 'off'}"\n\n[remote]\nbackoff = "100ms"\n\n[forge]\nrepo = "${gh.owner}/${gh.repo}"\napi_url = "${gh.url}"\n${/^backoff\s*=/m.test(opts.forge ?? '') ? '' : 'backoff = "50ms"\n'}${opts.forge ?? ''}\n[intake]\nlabel = "tron"\n${opts.intake ?? ''}`;
    const repo = await project({
      blocks: {},
      config: configFile({ workers, extra }),
      ...(opts.files && { files: typeof opts.files === 'function' ? opts.files(out) : opts.files }),
    });
    await publishTo(repo, bare, served);
    const cis: Ci[] = [];
    // Narrowed, for the closure below.
    const [server, scratch] = [gh, out];
    return {
      repo,
      bare,
      served,
      gh,
      out,
      env: envOf(gh),
      ci: (name, script, token) => {
        cis.push({ name, script, token: token ?? server.token });
        return installCis(bare, server, cis, scratch);
      },
      cleanup,
    };
  } catch (err) {
    await cleanup().catch(() => undefined);
    throw err;
  }
}

/** One hosted CI: the check it reports, what it runs, and the token (the app) it reports with. */
interface Ci {
  name: string;
  script: string;
  token: string;
}

/**
 * Hosted CI for tests: a post-receive hook on `bare` that, on every push of a `tron/*`
 * branch, runs `script` in a checkout of the pushed sha (under `scratch`) and reports check
 * `name` on that sha through the test GitHub server's API, as a CI app would.
 */
export async function installCi(bare: BareRemote, gh: GitHubServer, name: string, script: string, scratch: string): Promise<void> {
  await installCis(bare, gh, [{ name, script, token: gh.token }], scratch);
}

/** Several hosted CIs in one post-receive hook, reported in order, each with its own token. */
async function installCis(bare: BareRemote, gh: GitHubServer, cis: readonly Ci[], scratch: string): Promise<void> {
  const hook = `#!/usr/bin/env node
const { execFileSync, spawnSync } = require('node:child_process');
const { mkdtempSync, rmSync } = require('node:fs');
const lines = require('node:fs').readFileSync(0, 'utf8').trim().split('\\n');
(async () => {
  for (const line of lines) {
    const [, sha, ref] = line.split(' ');
    if (!ref || !ref.startsWith('refs/heads/tron/') || /^0+$/.test(sha)) continue;
    for (const ci of ${JSON.stringify(cis)}) {
      const dir = mkdtempSync(${JSON.stringify(join(scratch, 'ci-'))});
      execFileSync('git', ['--work-tree', dir, 'checkout', '-f', sha, '--', '.'], { env: { ...process.env, GIT_INDEX_FILE: dir + '.index' } });
      const run = spawnSync('sh', ['-c', ci.script], { cwd: dir, encoding: 'utf8' });
      rmSync(dir, { recursive: true, force: true });
      rmSync(dir + '.index', { force: true });
      const ok = run.status === 0;
      await fetch(${JSON.stringify(`${gh.url}/repos/${gh.owner}/${gh.repo}/check-runs`)}, {
        method: 'POST',
        headers: { authorization: 'token ' + ci.token, 'content-type': 'application/json' },
        body: JSON.stringify({ name: ci.name, head_sha: sha, status: 'completed', conclusion: ok ? 'success' : 'failure',
          output: { title: ci.name, summary: ok ? 'passed' : 'failed', text: (run.stdout || '') + (run.stderr || '') } }),
      });
    }
  }
})();
`;
  await bare.hook('post-receive', hook);
}
