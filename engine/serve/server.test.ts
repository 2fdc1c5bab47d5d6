import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../os/clock.ts';
import type { TronEvent } from '../core/events.ts';
import { startCommand } from '../commands/start.ts';
import { readLog } from '../log/eventlog.ts';
import { readInbox } from '../runtime/inbox.ts';
import { repoKey } from '../log/keys.ts';
import { carriedOverProject, landingSim, makeProject, runTron } from '../testing/project.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';
import { readSse } from '../testing/sse.ts';
import { EventLog } from '../log/eventlog.ts';
import { ROUTES, type Route } from './routes.ts';
import { serve, type Serving } from './server.ts';
import { issueToken, sha256, TOKENS_FILE } from './tokens.ts';
import { TRON_ROOT } from '../root.ts';
import { isLoopback, serveCommand } from '../commands/serve.ts';
import { renderOpenApi } from './openapi.ts';

let repo: TestRepo | undefined;
let serving: Serving | undefined;
afterEach(async () => {
  await serving?.close();
  serving = undefined;
  await repo?.cleanup();
  repo = undefined;
});

const STUCK_SIM = `[[blocks.good.builder]]\nwrite = { "good.txt" = "ok\\n" }\ncommit = "good"\nreply = ">>DONE"\n\n[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n`;

async function parkedRun(): Promise<{ token: string; run: Awaited<ReturnType<typeof runTron>> }> {
  repo = await makeProject({ blocks: { good: {}, stuck: {} }, sim: STUCK_SIM });
  const run = await runTron(repo);
  expect(run.exit).toBe(3);
  const token = issueToken(repo.dir, 'test', Date.now());
  serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
  return { token, run };
}

/** A concrete URL for a route of the table. */
function urlOf(r: Route, run: string): string {
  return `${serving!.url.slice(0, -1)}${r.path.replace('{id}', 'stuck').replace('{run}', run)}`;
}

const inboxFiles = (dir: string) => (existsSync(join(dir, '.tron', 'inbox')) ? readdirSync(join(dir, '.tron', 'inbox')) : []);

describe('tron serve: who may do what', () => {
  it('answers every route with 401 without a valid bearer token, and a refused answer writes nothing', async () => {
    const { run, token } = await parkedRun();
    const runId = run.runDir.split('/').at(-1)!;
    const bad = [undefined, 'Bearer', `Bearer ${token}x`, `Basic ${Buffer.from(`u:${token}`).toString('base64')}`, token];
    for (const [name, r] of Object.entries(ROUTES) as [string, Route][]) {
      for (const authorization of bad) {
        const res = await fetch(urlOf(r, runId), {
          method: r.method,
          headers: { ...(authorization ? { authorization } : {}), 'content-type': 'application/json', cookie: `token=${token}` },
          ...(r.method === 'POST' ? { body: JSON.stringify({ reply: '>>RETRY {"guidance":"go"}' }) } : {}),
        });
        expect(res.status, `${name} with ${authorization}`).toBe(401);
        expect(res.headers.get('set-cookie')).toBeNull();
        await res.body?.cancel();
      }
    }
    expect(inboxFiles(repo!.dir)).toEqual([]);
    // The same write with the token does change something: the test above could fail.
    const ok = await fetch(urlOf(ROUTES.answer, runId), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: JSON.stringify({ reply: '>>RETRY {"guidance":"go"}' }),
    });
    expect(ok.status).toBe(202);
    expect(inboxFiles(repo!.dir)).toHaveLength(1);
  });

  it('takes TRON_SERVE_TOKEN from the environment as a token named env', async () => {
    repo = await makeProject({ blocks: { stuck: {} }, sim: STUCK_SIM });
    await runTron(repo);
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, envToken: 'script-secret' });
    const res = await fetch(`${serving.url}api/v1/blocks/stuck/answer`, {
      method: 'POST',
      headers: { authorization: 'Bearer script-secret' },
      body: JSON.stringify({ reply: '>>ABANDON {"reason":"not needed"}' }),
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ block: 'stuck', by: 'serve:env' });
  });
});

describe('tron serve: the API', () => {
  it('serves the state folded as tron status folds it, a block with its turns and timeline, and a run’s events', async () => {
    const { token, run } = await parkedRun();
    const auth = { authorization: `Bearer ${token}` };
    const state = await (await fetch(`${serving!.url}api/v1/state`, { headers: auth })).json();
    expect(state.run).toBe(run.runDir.split('/').at(-1));
    expect(state.seq).toBe(run.events.length);
    expect(state.engine).toBe('finished');
    expect(state.phases[0]).toBe('pending');
    expect(state.phases).toEqual(expect.arrayContaining(['build', 'review', 'merge', 'landed', 'parked']));
    expect(state.blocks).toEqual([
      expect.objectContaining({
        block: 'good',
        title: 'Block good',
        phase: 'landed',
        attempt: 1,
        cost: expect.objectContaining({ usd: 0 }),
      }),
      expect.objectContaining({ block: 'stuck', phase: 'parked', waiting: 'operator', reason: 'blocked: no access' }),
    ]);

    const block = await (await fetch(`${serving!.url}api/v1/blocks/good`, { headers: auth })).json();
    expect(block.block.phase).toBe('landed');
    expect(block.turns[0]).toMatchObject({ role: 'builder', kind: 'build', turn: 1, ended: true });
    expect(block.timeline.map((e: TronEvent) => e.type)).toEqual(expect.arrayContaining(['block.dispatched', 'block.landed']));
    expect(block.timeline.every((e: { block?: string }) => e.block === 'good')).toBe(true);

    const built = block.turns[0];
    const log = await fetch(`${serving!.url}api/v1/blocks/good/logs?follow=0&session=${built.session}&turn=1`, { headers: auth });
    expect(log.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await log.text()).toContain('>>DONE');

    const page = await (await fetch(`${serving!.url}api/v1/runs/${state.run}/events?after=3&limit=5`, { headers: auth })).json();
    expect(page.events.map((e: TronEvent) => e.seq)).toEqual([4, 5, 6, 7, 8]);
    expect(page.events).toEqual(run.events.slice(3, 8));
    expect(page.next).toBe(8);

    const missing = await fetch(`${serving!.url}api/v1/blocks/nope`, { headers: auth });
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatchObject({ code: 'TRON_SERVE_BLOCK', path: 'nope' });

    const openapi = await fetch(`${serving!.url}api/v1/openapi.json`, { headers: auth });
    expect(await openapi.text()).toBe(renderOpenApi());
  });

  it('answers a parked block as tron answer does: checked, signed with the repository’s key, in the inbox, naming the token', async () => {
    const { token } = await parkedRun();
    const post = (block: string, reply: string) =>
      fetch(`${serving!.url}api/v1/blocks/${block}/answer`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        body: JSON.stringify({ reply }),
      });
    const notParked = await post('good', '>>RETRY {"guidance":"again"}');
    expect(notParked.status).toBe(409);
    expect((await notParked.json()).error.code).toBe('TRON_ANSWER_NOT_PARKED');
    const illegal = await post('stuck', '>>APPROVE');
    expect(illegal.status).toBe(400);
    expect((await illegal.json()).error.code).toBe('TRON_ANSWER_INVALID');
    expect(inboxFiles(repo!.dir)).toEqual([]);

    const res = await post('stuck', '>>RETRY {"guidance":"use the staging key"}');
    expect(res.status).toBe(202);
    // The run is over and no engine runs: the next `tron start` reads it, as `tron answer` says.
    expect(await res.json()).toMatchObject({ block: 'stuck', by: 'serve:test', engine: 'stopped' });
    const { answers, refused } = readInbox(repo!.dir, repoKey(repo!.dir)!.key);
    expect(refused).toEqual([]);
    expect(answers).toEqual([
      expect.objectContaining({ block: 'stuck', word: 'RETRY', by: 'serve:test', payload: { guidance: 'use the staging key' } }),
    ]);
    // The state says the answer waits in the inbox, as tron status does.
    const state = await (await fetch(`${serving!.url}api/v1/state`, { headers: { authorization: `Bearer ${token}` } })).json();
    expect(state.blocks[1].answer).toMatchObject({ word: 'RETRY' });
  });
});

describe('tron serve: a block carried over from an earlier run', () => {
  it('shows its turns and their output from the run they happened in, and refuses a run that is not there by code', async () => {
    const carried = await carriedOverProject();
    repo = carried.repo;
    const [first, second] = [carried.first.runDir, carried.second.runDir].map((d) => d.split('/').at(-1)!);
    expect(carried.second.events).toContainEqual(expect.objectContaining({ type: 'block.recovered', block: 'stuck', phase: 'parked' }));
    const token = issueToken(repo.dir, 'test', Date.now());
    const auth = { authorization: `Bearer ${token}` };
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });

    const block = await (await fetch(`${serving.url}api/v1/blocks/stuck`, { headers: auth })).json();
    expect(block.run).toBe(second);
    expect(block.block.phase).toBe('parked');
    expect(block.turns).toEqual([
      expect.objectContaining({ run: first, session: 'stuck.1.builder', turn: 1, role: 'builder', ended: true }),
    ]);
    // A block with turns in the latest run names that run.
    const later = await (await fetch(`${serving.url}api/v1/blocks/later`, { headers: auth })).json();
    expect(later.turns[0]).toMatchObject({ run: second, turn: 1 });

    const logs = (query: string) => fetch(`${serving!.url}api/v1/blocks/stuck/logs?${query}`, { headers: auth });
    const named = await logs(`run=${first}&session=stuck.1.builder&turn=1`);
    expect(named.status).toBe(200);
    expect(await named.text()).toContain('>>BLOCKED {"reason":"which provider?"}');
    // Without run=, where the block last had a turn, as `tron logs stuck` shows it; and at once: that run is over.
    const latest = await logs('');
    expect(latest.status).toBe(200);
    expect(await latest.text()).toContain('which provider?');
    // The latest run named: the block had no turn there.
    const none = await logs(`run=${second}`);
    expect(none.status).toBe(404);
    expect((await none.json()).error).toMatchObject({ code: 'TRON_USAGE', path: 'stuck' });
    for (const run of ['20200101-000000-001', '..', '.tron']) {
      const missing = await logs(`run=${encodeURIComponent(run)}`);
      expect(missing.status, run).toBe(404);
      expect((await missing.json()).error, run).toMatchObject({ code: 'TRON_RUN_NOT_FOUND', path: run });
    }
  });
});

describe('tron serve: where an answer goes', () => {
  it('says the running engine reads an answer sent while tron start runs', async () => {
    repo = await makeProject({ blocks: { stuck: {} }, sim: STUCK_SIM });
    const token = issueToken(repo.dir, 'test', Date.now());
    const auth = { authorization: `Bearer ${token}` };
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, pollMs: 50 });
    const stop = new AbortController();
    const started = startCommand({
      repo: repo.dir,
      watch: true,
      stop: stop.signal,
      clock: systemClock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV },
      print: () => {},
    });
    const answer = (reply: string) =>
      fetch(`${serving!.url}api/v1/blocks/stuck/answer`, { method: 'POST', headers: auth, body: JSON.stringify({ reply }) });
    try {
      const parked = async () => {
        const res = await fetch(`${serving!.url}api/v1/state`, { headers: auth });
        const state = res.ok ? await res.json() : undefined;
        return state?.blocks.some((b: { block: string; phase: string }) => b.block === 'stuck' && b.phase === 'parked') === true;
      };
      while (!(await parked())) await new Promise((r) => setTimeout(r, 50));
      const res = await answer('>>ABANDON {"reason":"not needed"}');
      expect(res.status).toBe(202);
      expect(await res.json()).toMatchObject({ block: 'stuck', engine: 'running' });
    } finally {
      stop.abort();
      await started;
    }
  });
});

describe('tron serve: what it believes', () => {
  it('never serves a line of the log that tron did not write (one that breaks the signature chain)', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const key = repoKey(repo.dir, { create: true }).key;
    const runDir = join(repo.dir, '.tron', 'runs', '20260101-000000-001');
    const log = EventLog.open(runDir, { clock: new ManualClock(1000), key });
    log.append({ type: 'run.heartbeat', running: 1, parked: 0 });
    // A worker without a sandbox can write the file: a forged, well-formed line with the next seq.
    appendFileSync(
      join(runDir, 'events.jsonl'),
      `${JSON.stringify({ v: 2, seq: 2, ts: 1000, type: 'run.heartbeat', running: 666, parked: 0, mac: '0'.repeat(32) })}\n`,
    );
    log.append({ type: 'run.heartbeat', running: 3, parked: 0 });
    log.close();
    const token = issueToken(repo.dir, 'test', Date.now());
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    const { messages } = await readSse(`${serving.url}api/v1/events`, { token, until: (m) => m.id === '2' });
    expect(messages.map((m) => JSON.parse(m.data).running)).toEqual([1, 3]);
    const page = await (
      await fetch(`${serving.url}api/v1/runs/20260101-000000-001/events`, { headers: { authorization: `Bearer ${token}` } })
    ).json();
    expect(page.events.map((e: { running: number }) => e.running)).toEqual([1, 3]);
  });

  it('refuses to bind an address other machines reach when no TRON_SERVE_TOKEN was chosen, before it writes anything', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const opts = { repo: repo.dir, host: '0.0.0.0', port: 0, clock: systemClock, print: () => {} };
    await expect(serveCommand({ ...opts, env: {} })).rejects.toMatchObject({
      problems: [expect.objectContaining({ code: 'TRON_SERVE_EXPOSED' })],
    });
    // Nothing was written either: no token was issued for a server that did not start.
    expect(existsSync(join(repo.dir, '.tron', 'serve'))).toBe(false);
    expect(isLoopback('127.0.0.1') && isLoopback('::1') && isLoopback('localhost')).toBe(true);
    expect(isLoopback('192.168.1.4') || isLoopback('::')).toBe(false);
  });
});

describe('tron serve: the live stream', () => {
  it('streams a live run’s events with id = seq, and a cut connection resumes by Last-Event-ID with no gap and no duplicate', async () => {
    repo = await makeProject({ blocks: { a: {}, b: {}, c: {} }, sim: landingSim(['a', 'b', 'c']) });
    const token = issueToken(repo.dir, 'test', Date.now());
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, pollMs: 100 });
    const started = startCommand({
      repo: repo.dir,
      clock: systemClock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV },
      print: () => {},
    });
    // Until the run's log exists there is nothing to stream (404); then the stream starts at seq 1.
    let first: Awaited<ReturnType<typeof readSse>> = { messages: [], status: 404 };
    while (first.status !== 200) {
      first = await readSse(`${serving.url}api/v1/events`, { token, until: (m) => Number(m.id) >= 5 });
      if (first.status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    const cutAt = Number(first.messages.at(-1)!.id);
    const rest = await readSse(`${serving.url}api/v1/events`, {
      token,
      lastEventId: cutAt,
      until: (m) => (JSON.parse(m.data) as TronEvent).type === 'run.finished',
    });
    expect(await started).toBe(0);
    const seqs = [...first.messages, ...rest.messages].filter((m) => m.event === 'message').map((m) => Number(m.id));
    const log = readLog(join(serving.hub.current!.runDir, 'events.jsonl')).events;
    const finished = log.findIndex((e) => e.type === 'run.finished') + 1;
    expect(seqs).toEqual(Array.from({ length: finished }, (_, i) => i + 1));
    // The cut happened while the run was live: events came after it.
    expect(finished).toBeGreaterThan(cutAt + 10);
    const data = [...first.messages, ...rest.messages].map((m) => JSON.parse(m.data) as TronEvent);
    expect(data).toEqual(log.slice(0, finished));
  });

  it('streams a running turn’s output as the worker writes it, and ends the response when the turn ends', async () => {
    const sim = `[[blocks.a.builder]]\nwrite = { "a.txt" = "a\\n" }\ncommit = "a"\nsleep = "2500ms"\nreply = ">>DONE"\n`;
    repo = await makeProject({ blocks: { a: {} }, sim });
    const token = issueToken(repo.dir, 'test', Date.now());
    const auth = { authorization: `Bearer ${token}` };
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, pollMs: 50 });
    const started = startCommand({
      repo: repo.dir,
      clock: systemClock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV },
      print: () => {},
    });
    const turn = async () => {
      const res = await fetch(`${serving!.url}api/v1/blocks/a`, { headers: auth });
      return res.ok ? ((await res.json()).turns[0] as { session: string; ended: boolean } | undefined) : undefined;
    };
    let first = await turn();
    while (!first) {
      await new Promise((r) => setTimeout(r, 20));
      first = await turn();
    }
    const res = await fetch(`${serving.url}api/v1/blocks/a/logs?session=${first.session}&turn=1`, { headers: auth });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value, { stream: true });
    // The first output came while the turn was still running.
    expect((await turn())!.ended).toBe(false);
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
    expect(text).toContain('» sim: committed "a"');
    expect(text).toContain('» sim: working on a');
    expect(text).toContain('>>DONE');
    expect(await started).toBe(0);
  });

  it('tells a client that is behind the memory window (event: gap) and re-syncs it from the log, losing nothing', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const runDir = join(repo.dir, '.tron', 'runs', '20260101-000000-001');
    const log = EventLog.open(runDir, { clock: new ManualClock(1000), key: null });
    for (let i = 0; i < 300; i++) log.append({ type: 'run.heartbeat', running: i, parked: 0 });
    const token = issueToken(repo.dir, 'test', Date.now());
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, window: 16 });
    const read = readSse(`${serving.url}api/v1/events`, { token, lastEventId: 10, until: (m) => Number(m.id) === 400 });
    // More arrives while it reads.
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 300; i < 400; i++) log.append({ type: 'run.heartbeat', running: i, parked: 0 });
    serving.hub.current!.poke();
    const { messages } = await read;
    log.close();
    const gap = messages.find((m) => m.event === 'gap');
    expect(gap && JSON.parse(gap.data)).toMatchObject({ from: 11 });
    expect(messages[0]!.event).toBe('gap');
    const seqs = messages.filter((m) => m.event === 'message').map((m) => Number(m.id));
    expect(seqs).toEqual(Array.from({ length: 390 }, (_, i) => i + 11));
  });
});

describe('tron serve: tokens', () => {
  it('keeps only a signed sha256 of each token, and a row anyone else adds to the file lets nobody in', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const token = issueToken(repo.dir, 'mine', 1000);
    const file = join(repo.dir, TOKENS_FILE);
    expect(readFileSync(file, 'utf8')).not.toContain(token);
    expect(readFileSync(join(repo.dir, '.tron', 'serve', '.gitignore'), 'utf8')).toBe('*\n');
    const rows = JSON.parse(readFileSync(file, 'utf8')).tokens;
    expect(rows).toEqual([{ name: 'mine', sha256: sha256(token), created: 1000, epoch: 1, mac: expect.stringMatching(/^[0-9a-f]{32}$/) }]);
    // A forged row: the hash of a token of its own, with a made-up signature.
    rows.push({ name: 'forged', sha256: sha256('forged-token'), created: 1001, mac: '0'.repeat(32) });
    writeFileSync(file, JSON.stringify({ tokens: rows }));
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    const as = (t: string) => fetch(`${serving!.url}api/v1/state`, { headers: { authorization: `Bearer ${t}` } }).then((r) => r.status);
    expect(await as('forged-token')).toBe(401);
    expect(await as(token)).toBe(200);
  });

  it('keeps a token removed from the file removed: its exact row put back lets nobody in, a new token does', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const file = join(repo.dir, TOKENS_FILE);
    const old = issueToken(repo.dir, 'old', 1000);
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    const as = (t: string) => fetch(`${serving!.url}api/v1/state`, { headers: { authorization: `Bearer ${t}` } }).then((r) => r.status);
    expect(await as(old)).toBe(200);
    const signedRow = readFileSync(file, 'utf8');
    writeFileSync(file, JSON.stringify({ tokens: [] }));
    expect(await as(old)).toBe(401);
    // The row as tron signed it, byte for byte: its epoch is at or below the mark now.
    writeFileSync(file, signedRow);
    expect(await as(old)).toBe(401);
    // And stays so for the next tron serve, which knows the mark from the repository's state folder.
    await serving.close();
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    expect(await as(old)).toBe(401);
    const fresh = issueToken(repo.dir, 'fresh', 2000);
    expect(await as(fresh)).toBe(200);
    expect(await as(old)).toBe(401);
  });

  it('revokes a row removed from the middle alone: the others keep working, and an old copy of the whole file revives none', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const file = join(repo.dir, TOKENS_FILE);
    const [a, b, c] = ['a', 'b', 'c'].map((name, i) => issueToken(repo!.dir, name, 1000 + i)) as [string, string, string];
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    const as = (t: string) => fetch(`${serving!.url}api/v1/state`, { headers: { authorization: `Bearer ${t}` } }).then((r) => r.status);
    expect([await as(a), await as(b), await as(c)]).toEqual([200, 200, 200]);
    const before = readFileSync(file, 'utf8');
    const rows = JSON.parse(before).tokens as { name: string }[];
    writeFileSync(file, JSON.stringify({ tokens: rows.filter((r) => r.name !== 'b') }));
    expect([await as(a), await as(b), await as(c)]).toEqual([200, 401, 200]);
    // b's row put back beside the others: still out, and a and c still in.
    const now = JSON.parse(readFileSync(file, 'utf8')).tokens as { name: string }[];
    writeFileSync(file, JSON.stringify({ tokens: [...now, rows.find((r) => r.name === 'b')] }));
    expect([await as(a), await as(b), await as(c)]).toEqual([200, 401, 200]);
    // The whole file as it was before b was removed: every row in it is at or below the mark.
    writeFileSync(file, before);
    expect([await as(a), await as(b), await as(c)]).toEqual([401, 401, 401]);
  });

  it('records a removal made while no tron serve ran at the next start: the row put back after it lets nobody in', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const file = join(repo.dir, TOKENS_FILE);
    const old = issueToken(repo.dir, 'old', 1000);
    const oldRow = JSON.parse(readFileSync(file, 'utf8')).tokens[0];
    writeFileSync(file, JSON.stringify({ tokens: [] }));
    // What `tron serve` does as it starts.
    const next = issueToken(repo.dir, 'next', 2000);
    const rows = JSON.parse(readFileSync(file, 'utf8')).tokens;
    writeFileSync(file, JSON.stringify({ tokens: [oldRow, ...rows] }));
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    const as = (t: string) => fetch(`${serving!.url}api/v1/state`, { headers: { authorization: `Bearer ${t}` } }).then((r) => r.status);
    expect(await as(old)).toBe(401);
    expect(await as(next)).toBe(200);
  });

  it('keeps a token that fell out of the newest twenty out, its row put back', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const file = join(repo.dir, TOKENS_FILE);
    const first = issueToken(repo.dir, 'first', 1000);
    const firstRow = JSON.parse(readFileSync(file, 'utf8')).tokens[0];
    let last = '';
    for (let i = 1; i <= 20; i++) last = issueToken(repo.dir, `t${i}`, 1000 + i);
    const rows = JSON.parse(readFileSync(file, 'utf8')).tokens as { name: string }[];
    expect(rows.map((r) => r.name)).toEqual(Array.from({ length: 20 }, (_, i) => `t${i + 1}`));
    writeFileSync(file, JSON.stringify({ tokens: [firstRow, ...rows] }));
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    const as = (t: string) => fetch(`${serving!.url}api/v1/state`, { headers: { authorization: `Bearer ${t}` } }).then((r) => r.status);
    expect(await as(first)).toBe(401);
    expect(await as(last)).toBe(200);
  });
});

describe('tron serve: the command', () => {
  it('prints the dashboard URL with a fresh token that the API takes, and ends any stream with event: run when a newer run starts', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const log = EventLog.open(join(repo.dir, '.tron', 'runs', '20260101-000000-001'), { clock: new ManualClock(1000), key: null });
    log.append({ type: 'run.heartbeat', running: 0, parked: 0 });
    log.close();
    const child = spawn(process.execPath, [join(TRON_ROOT, 'bin', 'tron.js'), 'serve', '--repo', repo.dir, '--port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout.on('data', (c: Buffer) => {
        out += c.toString();
      });
      while (!/#token=\S+/.test(out)) await new Promise((r) => setTimeout(r, 20));
      const [, url, token] = /dashboard\s+(http:\/\/127\.0\.0\.1:\d+\/)#token=(\S+)/.exec(out)!;
      const state = await (await fetch(`${url}api/v1/state`, { headers: { authorization: `Bearer ${token}` } })).json();
      expect(state).toMatchObject({ run: '20260101-000000-001', seq: 1 });
      const html = await (await fetch(url!)).text();
      expect(html).toContain('<div id="board">');
      expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
      let connected: () => void = () => {};
      const first = new Promise<void>((r) => {
        connected = r;
      });
      const stream = readSse(`${url}api/v1/events`, { token: token!, until: (m) => m.event === 'run', onMessage: () => connected() });
      await first;
      const next = EventLog.open(join(repo.dir, '.tron', 'runs', '20260101-000000-002'), { clock: new ManualClock(2000), key: null });
      next.append({ type: 'run.heartbeat', running: 0, parked: 0 });
      next.close();
      const { messages } = await stream;
      expect(messages.map((m) => m.event)).toEqual(['message', 'run']);
      expect(JSON.parse(messages[1]!.data)).toEqual({ run: '20260101-000000-002' });
    } finally {
      child.kill();
    }
  });
});
