import { describe, expect, it, onTestFinished } from 'vitest';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { configFile, project, ofType, readRunFile, runTron } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { replay } from '../core/replay.ts';
import { loadSpine } from '../spine/load.ts';

/** A sim turn that adds a module and its passing test, then claims DONE. */
function builds(id: string, file = `${id}.js`): string {
  return `[[blocks.${id}.builder]]
write = { "${file}" = "exports.value = '${id}';\\n", "tests/${id}.test.js" = "require('node:assert').strictEqual(require('../${file}').value, '${id}');\\n" }
commit = "Add ${id}"
reply = ">>DONE"
`;
}

async function landedRefs(repo: TestRepo): Promise<string[]> {
  const out = await repo.git('for-each-ref', '--format=%(refname)', 'refs/tron/landed/');
  return out.split('\n').filter(Boolean).sort();
}

/** Runs the project's tests at a sha, in a checkout of its own. */
async function testsPassAt(repo: TestRepo, sha: string): Promise<boolean> {
  const dir = join(repo.dir, '.tron', `verify-${sha.slice(0, 8)}`);
  await repo.git('worktree', 'add', '-q', '--detach', dir, sha);
  const result = await execa('node', ['test.js'], { cwd: dir, reject: false });
  await repo.git('worktree', 'remove', '--force', dir);
  return result.exitCode === 0;
}

async function expectTidy(repo: TestRepo): Promise<void> {
  expect(await repo.git('branch', '--list', 'tron/*')).toBe('');
  const worktrees = (await repo.git('worktree', 'list', '--porcelain')).split('\n').filter((l) => l.startsWith('worktree '));
  expect(worktrees).toEqual([`worktree ${repo.dir}`]);
  expect(await repo.git('rev-list', '--min-parents=2', 'main')).toBe('');
}

describe('tron start', () => {
  it('lands blocks with dependencies in dependency order, each tested green on trunk', async () => {
    const repo = await project({
      blocks: { base: {}, top: { depends_on: ['base'] }, middle: { depends_on: ['base'], priority: 1 } },
      sim: builds('base') + builds('top') + builds('middle'),
      config: configFile({ maxParallel: 1 }),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    const landed = ofType(run.events, 'block.landed');
    expect(landed.map((e) => e.block)).toEqual(['base', 'top', 'middle']);
    expect(await landedRefs(repo)).toEqual(['refs/tron/landed/base', 'refs/tron/landed/middle', 'refs/tron/landed/top']);
    for (const e of landed) expect(await testsPassAt(repo, e.sha)).toBe(true);
    expect(ofType(run.events, 'candidate.tested').every((e) => e.ok)).toBe(true);
    expect(await repo.git('rev-parse', 'main')).toBe(landed.at(-1)!.sha);
    await expectTidy(repo);
    for (const name of ['events.jsonl', 'transcript.md', 'manifest.json', 'report.md', 'workflow.toml'])
      expect(existsSync(join(run.runDir, name))).toBe(true);
  });

  it('lands parallel blocks that touch different files with no merge turn: the engine rebases the second itself', async () => {
    const repo = await project({ blocks: { left: {}, right: {} }, sim: builds('left') + builds('right') });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    expect(ofType(run.events, 'block.landed')).toHaveLength(2);
    expect(ofType(run.events, 'block.dispatched').filter((e) => e.kind === 'merge')).toEqual([]);
    for (const id of ['left', 'right']) {
      const phases = ofType(run.events, 'block.phase').filter((e) => e.block === id && e.from === 'merge');
      expect(phases.map((e) => e.on)).toEqual(['landed']);
    }
    expect(readFileSync(join(repo.dir, 'left.js'), 'utf8')).toContain('left');
    expect(readFileSync(join(repo.dir, 'right.js'), 'utf8')).toContain('right');
    for (const e of ofType(run.events, 'block.landed')) expect(await testsPassAt(repo, e.sha)).toBe(true);
    await expectTidy(repo);
  });

  const lies: Array<[string, string, string]> = [
    ['a DONE with no commits', 'commits', `[[blocks.liar.builder]]\nreply = ">>DONE"\n`],
    [
      'a DONE with red tests',
      'tests',
      `[[blocks.liar.builder]]\nwrite = { "tests/liar.test.js" = "require('node:assert').strictEqual(1, 2);\\n" }\ncommit = "A red test"\nreply = ">>DONE"\n`,
    ],
    [
      'a DONE with uncommitted changes',
      'clean',
      `[[blocks.liar.builder]]\nwrite = { "liar.js" = "exports.x = 1;\\n" }\ncommit = "Half the work"\nrun = "echo 'exports.y = 2;' > rest.js"\nreply = ">>DONE"\n`,
    ],
  ];
  for (const [title, fact, sim] of lies) {
    it(`catches ${title} by the '${fact}' fact, tells the builder, and never lands it`, async () => {
      const repo = await project({ blocks: { liar: {} }, sim });
      const run = await runTron(repo);
      expect(run.exit).toBe(3);
      const failed = ofType(run.events, 'gate.failed');
      expect(failed.length).toBeGreaterThanOrEqual(3);
      for (const f of failed) expect(f.facts.find((x) => x.name === fact)?.ok).toBe(false);
      expect(ofType(run.events, 'block.landed')).toHaveLength(0);
      expect(await landedRefs(repo)).toEqual([]);
      expect(ofType(run.events, 'escalation.raised').map((e) => e.trouble)).toContain('gate_budget');
      expect(readRunFile(run.runDir, 'transcript.md')).toContain(`${fact}:`);
      expect(run.output.join('\n')).toContain('answer: tron answer --repo');
    });
  }

  for (const mode of ['auto', 'off'] as const) {
    it(`fails the 'tests' fact of a test that leaves a detached process, at its timeout, with nothing left running (sandbox ${mode})`, async () => {
      const token = `${1000 + Math.floor(Math.random() * 900)}.${process.pid}`;
      const config = configFile({ extra: `[sandbox]\nmode = "${mode}"\n` })
        // Trunk's suite is green (checked before work starts); the block's a.js makes it hang.
        .replace(
          'test = "node test.js"',
          `test = "node test.js && echo suite passed && if [ -e a.js ]; then (setsid sleep ${token} &) && sleep ${token}; fi"`,
        )
        // Long enough for `node test.js` to print on a busy machine; the sleep outlasts any budget.
        .replace('test = "1m"', 'test = "4s"');
      // Told of the failure, the builder gives up: one timed-out gate shows it all (the
      // honest default would claim DONE again, and wait out the budget twice more).
      const sim = `${builds('a')}\n[[blocks.a.builder]]\nreply = '>>BLOCKED {"reason":"the suite hangs"}'\n`;
      const repo = await project({ blocks: { a: {} }, sim, config });
      const run = await runTron(repo);
      expect(run.exit).toBe(3);
      const observed = ofType(run.events, 'facts.observed').filter((e) => e.tests);
      expect(observed.length).toBeGreaterThanOrEqual(1);
      for (const e of observed)
        expect(e.tests).toMatchObject({ exit: null, timed_out: true, tail: expect.stringContaining('suite passed') });
      const fact = ofType(run.events, 'gate.failed')[0]!.facts.find((f) => f.name === 'tests')!;
      expect(fact).toMatchObject({
        ok: false,
        evidence: expect.stringMatching(/timed out at [0-9a-f]+, and every process it started was ended[\s\S]*suite passed/),
      });
      expect(ofType(run.events, 'block.landed')).toHaveLength(0);
      const left = readdirSync('/proc').filter((pid) => /^\d+$/.test(pid) && cmdline(pid).includes(token));
      expect(left).toEqual([]);
    });
  }

  it("pages the operator with git's words when a block's branch cannot be made, lands the other block, and the run replays", async () => {
    const repo = await project({ blocks: { a: {}, b: {} }, sim: `${builds('a')}\n${builds('b')}` });
    // A ref under tron/a/ makes the branch tron/a impossible to create: the worktree effect fails for a alone.
    await repo.git('update-ref', 'refs/heads/tron/a/x', 'HEAD');
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    expect(ofType(run.events, 'run.failed')).toEqual([]);
    expect(ofType(run.events, 'worktree.failed')).toMatchObject([{ block: 'a', detail: expect.stringContaining('tron/a') }]);
    expect(ofType(run.events, 'escalation.raised')).toMatchObject([{ block: 'a', trouble: 'worktree_failed', handler: 'operator' }]);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['b']);
    expect(replay(run.events, { spine: loadSpine(), testCommand: 'node test.js' })).toMatchObject({ ok: true });
  });

  it('catches a worker that committed to trunk, pages the operator and lands nothing', async () => {
    const repo = await project({
      blocks: { sneaky: {} },
      sim: `[[blocks.sneaky.builder]]\nwrite = { "sneaky.js" = "exports.s = 1;\\n" }\ncommit = "Work"\ntrunk_commit = { "oops.txt" = "on trunk\\n" }\nreply = ">>DONE"\n`,
    });
    const trunkBefore = await repo.git('rev-parse', 'main');
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const failed = ofType(run.events, 'gate.failed');
    expect(failed[0]!.facts.find((f) => f.name === 'trunk_untouched')?.ok).toBe(false);
    const escalation = ofType(run.events, 'escalation.raised')[0]!;
    expect(escalation.trouble).toBe('trunk_touched');
    expect(escalation.sha).toBe(await repo.git('rev-parse', 'main'));
    expect(escalation.sha).not.toBe(trunkBefore);
    expect(ofType(run.events, 'page.sent')).toHaveLength(1);
    expect(await landedRefs(repo)).toEqual([]);
  });

  it("sends a block back to build on the reviewer's CHANGES, with the notes, and lands the revision", async () => {
    const repo = await project({
      blocks: { doc: {} },
      sim:
        builds('doc') +
        `[[blocks.doc.reviewer]]\nreply = '>>CHANGES {"notes":"add a README line about doc"}'\n\n` +
        `[[blocks.doc.builder]]\nreply = '>>CONFIRMED {"evidence":{"c1":"tests/doc.test.js"}}'\n\n` +
        `[[blocks.doc.builder]]\nwrite = { "README.md" = "doc exists\\n" }\ncommit = "Document doc"\nreply = ">>DONE"\n`,
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    const back = ofType(run.events, 'block.phase').filter((e) => e.from === 'review' && e.to === 'build');
    expect(back.map((e) => e.on)).toEqual(['CHANGES']);
    expect(readRunFile(run.runDir, 'transcript.md')).toContain('add a README line about doc');
    expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('doc exists\n');
    expect(ofType(run.events, 'gate.passed')).toHaveLength(2);
  });

  it('runs command workers per the contract: reviewer detached at the attested sha, only the passed variables', async () => {
    const repo = await project({ blocks: { cmd: { criteria: ['cmd.js exists'] } } });
    const builder = join(repo.dir, '..', `${repo.dir.split('/').at(-1)}-builder.sh`);
    const reviewer = join(repo.dir, '..', `${repo.dir.split('/').at(-1)}-reviewer.sh`);
    onTestFinished(() => {
      rmSync(builder, { force: true });
      rmSync(reviewer, { force: true });
    });
    // The one folder the workers may write besides their checkout (their `writable` list): where they note their environment.
    const notes = mkdtempSync(join(tmpdir(), 'tron-notes-'));
    writeFileSync(
      builder,
      `#!/bin/sh
cat > /dev/null
env > "${notes}/env-$TRON_ROLE-$TRON_TURN.txt"
if [ "$TRON_TURN" = "1" ]; then
  echo "exports.cmd = 1;" > cmd.js && git add cmd.js && git commit -q -m "Add cmd"
  echo ">>DONE"
else
  echo '>>CONFIRMED {"evidence":{"c1":"cmd.js is committed"}}'
fi
`,
    );
    writeFileSync(
      reviewer,
      `#!/bin/sh
cat > /dev/null
env > "${notes}/env-$TRON_ROLE-$TRON_TURN.txt"
head=$(git rev-parse HEAD); sym=$(git symbolic-ref -q HEAD || echo detached)
echo ">>APPROVE {\\"notes\\":\\"$head $sym\\"}"
`,
    );
    chmodSync(builder, 0o755);
    chmodSync(reviewer, 0o755);
    await repo.write(
      '.tron/config.toml',
      configFile({
        workers: `[workers.builder]\nadapter = "command"\ncommand = ["${builder}"]\nenv = ["PASSED_VAR"]\nwritable = ["${notes}"]\n\n[workers.reviewer]\nadapter = "command"\ncommand = ["${reviewer}"]\nwritable = ["${notes}"]\n`,
      }),
    );
    await repo.commitAll('Command workers');
    const run = await runTron(repo, { env: { PASSED_VAR: 'yes', SECRET_VAR: 'leak' } });
    expect(run.exit).toBe(0);
    const attested = ofType(run.events, 'gate.passed')[0]!.sha;
    const approve = ofType(run.events, 'reply.accepted').find((e) => e.word === 'APPROVE')!;
    expect(approve.payload.notes).toBe(`${attested} detached`);
    const note = (name: string) => readFileSync(join(notes, name), 'utf8');
    const builderEnv = note('env-builder-1.txt');
    expect(builderEnv).toContain('PASSED_VAR=yes');
    expect(builderEnv).toContain('TRON_BLOCK=cmd');
    expect(builderEnv).toContain('TRON_PHASE=build');
    expect(builderEnv).not.toContain('SECRET_VAR');
    expect(builderEnv).not.toContain('GIT_AUTHOR_NAME');
    const reviewerEnv = note('env-reviewer-1.txt');
    expect(reviewerEnv).not.toContain('PASSED_VAR');
    expect(reviewerEnv).toContain('TRON_ROLE=reviewer');
    const session = (env: string) => env.match(/TRON_SESSION=(.*)/)![1];
    expect(session(note('env-builder-2.txt'))).toBe(session(builderEnv));
    rmSync(notes, { recursive: true, force: true });
  });
});

function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}
