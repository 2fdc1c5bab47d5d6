/**
 * The engine's own environment holds no secret once it runs (engine/os/own-env.ts): a test
 * command and a builder's shell line, both unsandboxed, read `/proc/<pid>/environ` of
 * every ancestor up to the engine, and find none of the secrets `tron start` was given.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { configFile, project } from '../testing/project.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tron.js');

const SECRETS: Record<string, string> = {
  GITHUB_TOKEN: 'ghp_forge0token0never0seen',
  TRON_SERVE_TOKEN: 'serve-token-never-seen',
  TRON_WEBHOOK_SECRET: 'webhook-secret-never-seen',
  ANTHROPIC_API_KEY: 'sk-ant-model-key-never-seen',
  DATABASE_URL: 'postgres://app:db-password-never-seen@127.0.0.1/app',
};

/** Reads the environ of each ancestor up to the engine (`bin/tron.js start`) and appends them to `out`. */
const PROBE = `const fs = require('node:fs');
const seen = [];
for (let pid = process.pid; pid > 1; ) {
  const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
  pid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  if (pid <= 1) break;
  const cmd = fs.readFileSync('/proc/' + pid + '/cmdline', 'latin1');
  let environ;
  try { environ = fs.readFileSync('/proc/' + pid + '/environ', 'latin1'); } catch (e) { environ = 'unreadable: ' + e.code; }
  seen.push({ pid, cmd, environ });
  if (cmd.includes('tron.js')) break;
}
fs.appendFileSync(process.argv[2], JSON.stringify(seen) + '\\n');
`;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("the engine's own environment", () => {
  it('shows no secret it was started with to an unsandboxed test command or builder reading /proc/<engine>/environ', async () => {
    const out = mkdtempSync(join(tmpdir(), 'tron-environ-'));
    dirs.push(out);
    const found = join(out, 'found.jsonl');
    const probe = join(out, 'probe.cjs');
    const repo = await project({
      blocks: { a: {} },
      config: configFile({ extra: '[sandbox]\nmode = "off"\n' }).replace('test = "node test.js"', `test = "node ${probe} ${found}"`),
      sim: `[[blocks.a.builder]]\nwrite = { "a.txt" = "a\\n" }\ncommit = "a"\nrun = "node ${probe} ${found}"\nreply = ">>DONE"\n`,
    });
    writeFileSync(probe, PROBE);
    const run = await execa('node', [BIN, 'start', '--repo', repo.dir, '--plain'], {
      reject: false,
      stdin: 'ignore',
      extendEnv: false,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV, ...SECRETS },
    });
    expect(run.exitCode, run.stderr).toBe(0);
    const reads = readFileSync(found, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Array<{ cmd: string; environ: string }>);
    // The builder's shell line and at least one test run each reached the engine and read its environ.
    expect(reads.length).toBeGreaterThanOrEqual(2);
    for (const chain of reads) {
      const engine = chain.at(-1)!;
      expect(engine.cmd).toContain('tron.js');
      expect(engine.environ).toContain('PATH=');
      for (const { environ } of chain) for (const secret of Object.values(SECRETS)) expect(environ).not.toContain(secret);
    }
  });
});
