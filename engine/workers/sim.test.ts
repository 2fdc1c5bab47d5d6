import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSimWorker } from './sim.ts';
import { ManualClock } from '../os/clock.ts';
import { silentObserver, type TurnKind, type TurnObserver, type TurnRequest } from './adapter.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A repository folder holding only a sim script (these turns touch no git). */
function repoWith(script: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-sim-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'sim.toml'), script);
  return dir;
}

function request(repo: string, kind: TurnKind, turn: number, extra: Partial<TurnRequest> = {}): TurnRequest {
  return {
    role: 'builder',
    block: 'b',
    session: 'b.1.builder',
    turn,
    phase: 'build',
    kind,
    prompt: '',
    cwd: repo,
    runDir: repo,
    timeoutMs: 30_000,
    signal: new AbortController().signal,
    criteria: ['it works'],
    ...extra,
  };
}

const reply = async (repo: string, kind: TurnKind, turn: number, extra: Partial<TurnRequest> = {}) => {
  const outcome = await createSimWorker({ adapter: 'sim', script: 'sim.toml' }, { repo }).runTurn(
    request(repo, kind, turn, extra),
    silentObserver,
  );
  return outcome.ok ? outcome.reply : `failed: ${outcome.failure}`;
};

describe('the sim worker', () => {
  it('reads a script without kinds in order, then answers honestly', async () => {
    const repo = repoWith(`[[blocks.b.builder]]\nreply = "first"\n\n[[blocks.b.builder]]\nreply = "second"\n`);
    expect(await reply(repo, 'build', 1)).toBe('first');
    expect(await reply(repo, 'challenge', 2)).toBe('second');
    expect(await reply(repo, 'build', 3)).toBe('>>DONE');
  });

  it('gives an entry with a kind only to a turn of that kind', async () => {
    const repo = repoWith(
      `[[blocks.b.builder]]\nkind = "merge"\nreply = "merged?"\n\n[[blocks.b.builder]]\nkind = "build"\nreply = "built"\n`,
    );
    expect(await reply(repo, 'build', 1)).toBe('built');
    expect(await reply(repo, 'challenge', 2)).toBe('>>CONFIRMED {"evidence":{"c1":"checked: it works"}}');
    expect(await reply(repo, 'merge', 3, { trunk: 'main' })).toBe('merged?');
  });

  it('gives the same turn the same entry, across engines sharing the repository', async () => {
    const repo = repoWith(`[[blocks.b.builder]]\nreply = "one"\n\n[[blocks.b.builder]]\nreply = "two"\n`);
    expect(await reply(repo, 'build', 1)).toBe('one');
    // A restarted engine (a new adapter) re-issuing turn 1 gets entry one again, then continues.
    expect(await reply(repo, 'build', 1)).toBe('one');
    expect(await reply(repo, 'build', 2)).toBe('two');
  });

  it('fails a turn scripted to exit non-zero', async () => {
    const repo = repoWith(`[[blocks.b.builder]]\nexit = 1\n`);
    expect(await reply(repo, 'build', 1)).toBe('failed: exit');
  });

  it('stays silent while it hangs, until the engine stops the turn', async () => {
    const repo = repoWith(`[[blocks.b.builder]]\nhang = true\n`);
    const stop = new AbortController();
    const pending = reply(repo, 'build', 1, { signal: stop.signal });
    setTimeout(() => stop.abort(), 50);
    expect(await pending).toBe('failed: aborted');
  });

  it('ends a hang at the hard budget as a timed-out turn', async () => {
    const repo = repoWith(`[[blocks.b.builder]]\nhang = true\n`);
    expect(await reply(repo, 'build', 1, { timeoutMs: 50 })).toBe('failed: timeout');
  });

  it("reports progress while it sleeps, so the liveness probe sees life, and sleeps on the turn's clock", async () => {
    const repo = repoWith(`[[blocks.b.builder]]\nsleep = "10m"\nreply = ">>DONE"\n`);
    const notes: string[] = [];
    const observer: TurnObserver = { ...silentObserver, progress: (n) => notes.push(n) };
    const worker = createSimWorker({ adapter: 'sim', script: 'sim.toml' }, { repo });
    const clock = new ManualClock();
    let outcome: unknown;
    const turn = worker.runTurn(request(repo, 'build', 1, { clock, timeoutMs: 3_600_000 }), observer).then((o) => (outcome = o));
    // Its sleep and its progress, both on the clock.
    while (clock.pending < 2) await new Promise((r) => setImmediate(r));
    clock.advance(599_999);
    await new Promise((r) => setImmediate(r));
    expect(outcome).toBeUndefined();
    expect(notes.length).toBe(2_999);
    clock.advance(1);
    await turn;
    expect(outcome).toEqual({ ok: true, reply: '>>DONE' });
    expect(clock.pending).toBe(0);
  });

  it('answers a probe like the turn it interrupts: silent while that turn hangs', async () => {
    const repo = repoWith(`[[blocks.b.builder]]\nhang = true\n`);
    const worker = createSimWorker({ adapter: 'sim', script: 'sim.toml' }, { repo });
    const stop = new AbortController();
    const hanging = worker.runTurn(request(repo, 'build', 1, { signal: stop.signal }), silentObserver);
    const probe = await worker.runTurn(request(repo, 'probe', 2, { timeoutMs: 50 }), silentObserver);
    expect(probe).toMatchObject({ ok: false, failure: 'timeout' });
    stop.abort();
    await hanging;
    const idle = await worker.runTurn(request(repo, 'probe', 3), silentObserver);
    expect(idle).toMatchObject({ ok: true, reply: expect.stringMatching(/^>>WORKING/) });
  });

  it('plays the "*" script for a block without its own, with {block} standing for its id', async () => {
    const repo = repoWith(
      `[[blocks."*".builder]]\nreply = '>>BLOCKED {"reason":"no {block} here"}'\n\n[[blocks.b.builder]]\nreply = "own"\n`,
    );
    expect(await reply(repo, 'build', 1)).toBe('own');
    expect(await reply(repo, 'build', 1, { block: 'login', session: 'login.1.builder' })).toBe('>>BLOCKED {"reason":"no login here"}');
  });

  it('has its architect page with what is missing and where, when a block has no builder script', async () => {
    const repo = repoWith(`[[blocks.other.builder]]\nreply = ">>DONE"\n`);
    const notes: string[] = [];
    const observer: TurnObserver = { ...silentObserver, progress: (n) => notes.push(n) };
    const worker = createSimWorker({ adapter: 'sim', script: 'sim.toml' }, { repo });
    await worker.runTurn(request(repo, 'build', 1, { block: 'subtract' }), observer);
    expect(notes).toEqual(['sim: no script for block subtract in sim.toml; this builder commits nothing']);
    const page = await worker.runTurn(
      request(repo, 'architect', 1, { role: 'architect', block: 'subtract', session: 's.architect' }),
      observer,
    );
    expect(page).toEqual({
      ok: true,
      reply: `>>PAGE ${JSON.stringify({
        reason:
          'the sim builder has no script for block subtract, so it commits nothing: add [[blocks.subtract.builder]] entries (or a [[blocks."*".builder]] default for every block) to sim.toml; the format is in docs/workers.md',
      })}`,
    });
  });

  it('refuses a script with an unknown action', () => {
    const repo = repoWith(`[[blocks.b.builder]]\nexplode = true\n`);
    expect(() => createSimWorker({ adapter: 'sim', script: 'sim.toml' }, { repo })).toThrow(/explode/);
  });
});
