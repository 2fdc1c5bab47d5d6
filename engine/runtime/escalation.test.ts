import { afterEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { configFile, project as tronProject, ofType, readRunFile, runTron, type ProjectSpec } from '../testing/project.ts';
import { answerCommand } from '../commands/answer.ts';
import { systemClock } from '../os/clock.ts';
import { isSameProcess } from '../os/proc.ts';
import type { TestRepo } from '../testing/repo.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Writes executable worker scripts into a folder outside the repository. */
function scripts(files: Record<string, string>): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-workers-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const paths: Record<string, string> = {};
  for (const [name, body] of Object.entries(files)) {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\n${body}\n`);
    chmodSync(path, 0o755);
    paths[name] = path;
  }
  return paths;
}

/** Command worker tables; each may write the folder its script is in (where the tests' workers keep notes). */
function workers(paths: Record<string, string>): string {
  return Object.entries(paths)
    .filter(([name]) => ['builder', 'reviewer', 'architect'].includes(name))
    .map(([role, path]) => `[workers.${role}]\nadapter = "command"\ncommand = ["${path}"]\nwritable = ["${dirname(path)}"]\n`)
    .join('\n');
}

const project = (blocks: ProjectSpec['blocks'], config: string): Promise<TestRepo> => tronProject({ blocks, config });

const APPROVE = 'cat > /dev/null; echo ">>APPROVE"';
/** A builder that does honest work in any session but the first attempt's. */
const HONEST = `if [ "$TRON_TURN" = 1 ]; then echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"; git add -A; git commit -qm "$TRON_BLOCK"; echo ">>DONE"; else echo '>>CONFIRMED {"evidence":{"c1":"committed"}}'; fi`;

describe('the exception spine', () => {
  it('restates a two-line reply once, pages through the architect, ends with exit 3, and lands after tron answer RETRY — one page in all', async () => {
    const pagesDir = mkdtempSync(join(tmpdir(), 'tron-pages-'));
    cleanups.push(() => rmSync(pagesDir, { recursive: true, force: true }));
    const pageLog = join(pagesDir, 'pages.jsonl');
    const paths = scripts({
      builder: `prompt=$(cat); printf '%s' "$prompt" > "$(dirname "$0")/prompt-$TRON_SESSION-$TRON_TURN.txt"
case "$TRON_SESSION" in
  *.1.builder) printf 'All done.\\n>>DONE\\n>>DONE {"summary":"twice"}\\n' ;;
  *) ${HONEST} ;;
esac`,
      reviewer: APPROVE,
      architect: 'cat > /dev/null; echo \'>>PAGE {"reason":"the builder cannot follow the gateway"}\'',
      pager: `cat >> "${pageLog}"; echo >> "${pageLog}"`,
    });
    const repo = await project({ twice: {} }, `page_command = ["${paths.pager}"]\n${configFile({ workers: workers(paths) })}`);

    const first = await runTron(repo);
    expect(first.exit).toBe(3);
    const refused = ofType(first.events, 'reply.refused');
    expect(refused.map((e) => [e.kind, e.turn])).toEqual([
      ['several_lines', 1],
      ['several_lines', 2],
    ]);
    expect(ofType(first.events, 'block.dispatched').find((e) => e.kind === 'restate')).toMatchObject({
      session: 'twice.1.builder',
      turn: 2,
    });
    const notes = dirname(paths.builder!);
    expect(readFileSync(join(notes, 'prompt-twice.1.builder-2.txt'), 'utf8')).toContain(refused[0]!.message);
    expect(ofType(first.events, 'escalation.raised').map((e) => e.handler)).toEqual(['restate', 'architect', 'operator']);
    expect(ofType(first.events, 'page.sent')).toHaveLength(1);
    expect(readRunFile(first.runDir, 'pages.md').match(/^## /gm)).toHaveLength(1);
    const console = first.output.join('\n');
    expect(console).toMatch(/twice is parked[\s\S]* {2}answer: tron answer --repo \S+ twice '>>RETRY/);
    // The page is said once, with its reason, on the console: not again when the block parks or the run ends.
    expect(console.match(/PAGE twice/g)).toHaveLength(1);
    expect(console.match(/the builder cannot follow the gateway/g)).toHaveLength(1);

    const lines: string[] = [];
    expect(
      await answerCommand({
        repo: repo.dir,
        block: 'twice',
        line: '>>RETRY {"guidance":"answer with exactly one >> line"}',
        clock: systemClock,
        print: (l) => lines.push(l),
      }),
    ).toBe(0);
    const second = await runTron(repo);
    expect(second.exit).toBe(0);
    expect(ofType(second.events, 'operator.answered')).toMatchObject([{ block: 'twice', word: 'RETRY' }]);
    expect(ofType(second.events, 'block.landed')).toHaveLength(1);
    expect(readFileSync(join(notes, 'prompt-twice.2.builder-1.txt'), 'utf8')).toContain('answer with exactly one >> line');
    expect(ofType(second.events, 'page.sent')).toHaveLength(0);
    const pages = readFileSync(pageLog, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(pages).toHaveLength(1);
    expect(pages[0]).toMatchObject({ block: 'twice', reason: expect.stringContaining('cannot follow the gateway') });
    expect(existsSync(join(repo.dir, '.tron', 'inbox'))).toBe(true);
    expect(await repo.git('ls-files', '--others', '--exclude-standard', '.tron/inbox')).toBe('');
  });

  it('refuses an operator answer that is not a legal operator word, writing nothing', async () => {
    const paths = scripts({ builder: 'cat > /dev/null; echo \'>>BLOCKED {"reason":"no"}\'', reviewer: APPROVE });
    const repo = await project({ stuck: {} }, configFile({ workers: workers(paths) }));
    expect((await runTron(repo)).exit).toBe(3);
    await expect(
      answerCommand({ repo: repo.dir, block: 'stuck', line: '>>APPROVE', clock: systemClock, print: () => {} }),
    ).rejects.toMatchObject({
      problems: [{ code: 'TRON_ANSWER_INVALID' }],
    });
    await expect(
      answerCommand({ repo: repo.dir, block: 'ghost', line: '>>ABANDON {"reason":"x"}', clock: systemClock, print: () => {} }),
    ).rejects.toMatchObject({
      problems: [{ code: 'TRON_ANSWER_BLOCK' }],
    });
    expect(
      existsSync(join(repo.dir, '.tron', 'inbox')) ? await repo.git('status', '--porcelain', '--ignored', '.tron/inbox') : '',
    ).not.toMatch(/\.json/);
  });

  it("abandons a block on the architect's ABANDON and parks every block that depends on it, with the reason", async () => {
    const paths = scripts({
      builder: 'cat > /dev/null; echo \'>>BLOCKED {"reason":"the API it needs does not exist"}\'',
      reviewer: APPROVE,
      architect: 'cat > /dev/null; echo \'>>ABANDON {"reason":"out of scope for this release"}\'',
    });
    const repo = await project(
      { core: {}, ui: { depends_on: ['core'] }, docs: { depends_on: ['ui'] } },
      configFile({ workers: workers(paths) }),
    );
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    expect(ofType(run.events, 'block.abandoned')).toMatchObject([{ block: 'core', reason: 'out of scope for this release' }]);
    const parked = ofType(run.events, 'block.parked');
    expect(parked.map((e) => e.block).sort()).toEqual(['docs', 'ui']);
    for (const p of parked) expect(p.reason).toContain('core, which was abandoned');
    expect(ofType(run.events, 'block.dispatched').filter((e) => e.block !== 'core')).toHaveLength(0);
  });

  it('pages the operator when the architect itself answers garbage', async () => {
    const paths = scripts({
      builder: 'cat > /dev/null; echo \'>>BLOCKED {"reason":"stuck"}\'',
      reviewer: APPROVE,
      architect: 'cat > /dev/null; echo "I think the builder should try again."',
    });
    const repo = await project({ lost: {} }, configFile({ workers: workers(paths) }));
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const escalations = ofType(run.events, 'escalation.raised');
    expect(escalations.map((e) => [e.trouble, e.handler])).toEqual([
      ['blocked', 'architect'],
      ['architect_failed', 'operator'],
    ]);
    expect(ofType(run.events, 'page.sent')).toHaveLength(1);
  });
});

describe('liveness: talk before you page', () => {
  const fast = `[liveness]\nprobe_wait = "300ms"\nextension = "1s"\nmax_extensions = 3\nreissues = 1\n`;

  it('probes a silently hung worker, re-issues the turn once, then pages — and no worker process survives', async () => {
    const paths = scripts({ builder: 'cat > /dev/null; sleep 60', reviewer: APPROVE });
    const config = configFile({ workers: workers(paths), extra: fast }).replace('turn = "1m"', 'turn = "1s"');
    const repo = await project({ hung: {} }, config);
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const types = run.events
      .map((e) => e.type)
      .filter((t) => ['worker.overran', 'worker.probed', 'turn.reissued', 'page.sent'].includes(t));
    expect(types).toEqual(['worker.overran', 'worker.probed', 'turn.reissued', 'worker.overran', 'worker.probed', 'page.sent']);
    expect(ofType(run.events, 'worker.probed').map((e) => e.alive)).toEqual([false, false]);
    expect(ofType(run.events, 'escalation.raised').map((e) => e.handler)).toEqual(['probe', 'reissue', 'probe', 'operator']);
    const spawned = ofType(run.events, 'worker.spawned');
    expect(spawned).toHaveLength(2);
    for (const w of spawned) expect(isSameProcess(w.pid, w.start_time)).toBe(false);
  });

  it('extends a slow worker that shows life instead of paging it', async () => {
    const paths = scripts({
      builder: `cat > /dev/null
if [ "$TRON_TURN" = 1 ]; then
  i=0; while [ $i -lt 25 ]; do echo "working $i"; sleep 0.1; i=$((i+1)); done
  echo slow > slow.txt; git add -A; git commit -qm slow; echo ">>DONE"
else echo '>>CONFIRMED {"evidence":{"c1":"slow.txt"}}'; fi`,
      reviewer: APPROVE,
    });
    // Its 2.5 s of work ends well inside the first extension, however busy the machine (a
    // worker that replies just as it is probed keeps its reply: effects/liveness.test.ts).
    const patient = fast.replace('extension = "1s"', 'extension = "5s"');
    const config = configFile({ workers: workers(paths), extra: patient }).replace('turn = "1m"', 'turn = "1s"');
    const repo = await project({ slow: {} }, config);
    const run = await runTron(repo);
    expect(run.exit, run.output.join('\n')).toBe(0);
    const probes = ofType(run.events, 'worker.probed');
    expect(probes.length).toBeGreaterThanOrEqual(1);
    expect(probes[0]).toMatchObject({ alive: true, signs: expect.arrayContaining(['output']) });
    expect(ofType(run.events, 'worker.extended').length).toBeGreaterThanOrEqual(1);
    expect(ofType(run.events, 'turn.reissued')).toHaveLength(0);
    expect(ofType(run.events, 'page.sent')).toHaveLength(0);
  });
});
