/**
 * The engine's own environment holds no secret once it runs (bin/own-env.js, run first of all by bin/tron.js). Without
 * a sandbox, a test command and a builder's shell line read `/proc/<pid>/environ` of every
 * process they can see, the engine included, and find none of the secrets `tron start` was
 * given; under bwrap they do not see the engine at all (a PID namespace of their own).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { BWRAP_SKIP } from './testing/bwrap.ts';
import { configFile, project } from './testing/project.ts';
import { GIT_IDENTITY_ENV } from './testing/repo.ts';

const BIN = join(import.meta.dirname, '..', 'bin', 'tron.js');

/** Each secret carries the mark the probe looks for (so the probe itself is given none of them). */
const MARK = 'nvr53en';
const SECRETS: Record<string, string> = {
  GITHUB_TOKEN: `ghp_forge0token0${MARK}`,
  TRON_SERVE_TOKEN: `serve-token-${MARK}`,
  TRON_WEBHOOK_SECRET: `webhook-secret-${MARK}`,
  ANTHROPIC_API_KEY: `sk-ant-model-key-${MARK}`,
  DATABASE_URL: `postgres://app:db-password-${MARK}@127.0.0.1/app`,
};

/**
 * Reads the environ of every process it can see; appends to argv[2] (when given) whether it
 * saw the engine (`bin/tron.js start`) and read its environ, and which processes held the
 * mark; exits 1 when one did.
 */
const PROBE = `const fs = require('node:fs');
let engine = false;
const leaks = [];
for (const pid of fs.readdirSync('/proc').filter((n) => /^[0-9]+$/.test(n))) {
  let cmd = '';
  let environ = '';
  try {
    cmd = fs.readFileSync('/proc/' + pid + '/cmdline', 'latin1');
    environ = fs.readFileSync('/proc/' + pid + '/environ', 'latin1');
  } catch { continue; }
  if (cmd.includes('tron.js') && cmd.includes('start') && environ.includes('PATH=')) engine = true;
  if (environ.includes('${MARK}')) leaks.push(pid + ' ' + cmd.replace(/\\0/g, ' '));
}
if (process.argv[2]) fs.appendFileSync(process.argv[2], JSON.stringify({ engine, leaks }) + '\\n');
if (leaks.length > 0) { console.log('leaks: ' + leaks.join('; ')); process.exit(1); }
`;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** `tron start` as the CLI runs, with the secrets in its environment and the probe as the test command (and builder line). */
async function startWithProbe(mode: 'off' | 'bwrap', found: string | undefined) {
  // In the repository: a sandboxed process sees its checkout, not the machine's /tmp.
  const line = `node probe.cjs${found ? ` ${found}` : ''}`;
  const repo = await project({
    blocks: { a: {} },
    config: configFile({ extra: `[sandbox]\nmode = "${mode}"\n` }).replace('test = "node test.js"', `test = ${JSON.stringify(line)}`),
    files: { 'probe.cjs': PROBE },
    sim: `[[blocks.a.builder]]\nwrite = { "a.txt" = "a\\n" }\ncommit = "a"\nrun = ${JSON.stringify(line)}\nreply = ">>DONE"\n`,
  });
  return execa('node', [BIN, 'start', '--repo', repo.dir, '--plain'], {
    reject: false,
    stdin: 'ignore',
    extendEnv: false,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV, ...SECRETS },
  });
}

describe("the engine's own environment", () => {
  it('shows no secret it was started with to an unsandboxed test command or builder reading /proc/<engine>/environ', async () => {
    const out = mkdtempSync(join(tmpdir(), 'tron-found-'));
    dirs.push(out);
    const found = join(out, 'found.jsonl');
    const run = await startWithProbe('off', found);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
    const reads = readFileSync(found, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { engine: boolean; leaks: string[] });
    // The builder's shell line and at least one test run each saw the engine and read its environ.
    expect(reads.length).toBeGreaterThanOrEqual(2);
    for (const read of reads) expect(read).toEqual({ engine: true, leaks: [] });
  });

  it.skipIf(BWRAP_SKIP !== undefined)('is out of sight of a sandboxed test command: it runs in a PID namespace of its own', async () => {
    // The probe writes nowhere it could be read back (the sandbox's /tmp is private): it fails the gate on a leak.
    const run = await startWithProbe('bwrap', undefined);
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(0);
  });
});
