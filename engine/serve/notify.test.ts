import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventBody, EventOf, TronEvent } from '../core/events.ts';
import { Notifier } from './notify.ts';
import { parseConfig } from '../project/config.ts';
import { configFile, landingSim, makeProject, ofType, runTron } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';

let repo: TestRepo | undefined;
let receiver: Server | undefined;
let scratch: string | undefined;
afterEach(async () => {
  receiver?.closeAllConnections();
  await new Promise((r) => (receiver ? receiver.close(r) : r(undefined)));
  receiver = undefined;
  await repo?.cleanup();
  repo = undefined;
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  scratch = undefined;
});

/** A webhook receiver on 127.0.0.1 that answers each request as `answer` says. */
async function listen(answer: (n: number, body: string, res: ServerResponse) => void): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  receiver = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      bodies.push(body);
      answer(bodies.length, body, res);
    });
  });
  await new Promise<void>((r) => receiver!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, bodies };
}

type Delivery = Omit<EventOf<'notify.delivered'> | EventOf<'notify.failed'>, 'v' | 'seq' | 'ts'>;

/** Every recorded delivery: notes in the log, and the lines written after the log was closed. */
function deliveries(run: { runDir: string; events: readonly { type: string }[] }): Delivery[] {
  const logged = run.events.filter((e) => e.type === 'notify.delivered' || e.type === 'notify.failed') as Delivery[];
  const file = join(run.runDir, 'notify.jsonl');
  const late = existsSync(file)
    ? readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Delivery)
    : [];
  return [...logged, ...late];
}

const config = (notify: string) => configFile({ extra: `\n[notify]\n${notify}\n` });

describe('[notify]', () => {
  it('tries a webhook that fails twice again, with backoff, and delivers it exactly once; the command channel too', async () => {
    const hook = await listen((n, _body, res) => {
      res.writeHead(n <= 2 ? 500 : 200).end(n <= 2 ? 'down' : 'ok');
    });
    scratch = mkdtempSync(join(tmpdir(), 'tron-notify-'));
    const notes = join(scratch, 'notes.jsonl');
    repo = await makeProject({
      blocks: { a: {} },
      sim: landingSim(['a']),
      config: config(
        `webhook = "${hook.url}"\ncommand = ["sh", "-c", "cat >> ${notes}; echo >> ${notes}"]\non = ["landed"]\nbackoff = "20ms"\nattempts = 4`,
      ),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    expect(hook.bodies).toHaveLength(3);
    for (const body of hook.bodies) expect(JSON.parse(body)).toEqual({ text: expect.stringMatching(/^tron: a landed \([0-9a-f]{12}\)/) });
    const landed = ofType(run.events, 'block.landed')[0]!;
    expect(deliveries(run)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'notify.delivered', channel: 'webhook', on: 'landed', block: 'a', about: landed.seq, attempts: 3 }),
        expect.objectContaining({ type: 'notify.delivered', channel: 'command', on: 'landed', block: 'a', attempts: 1 }),
      ]),
    );
    expect(deliveries(run)).toHaveLength(2);
    const told = readFileSync(notes, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(told).toEqual([
      expect.objectContaining({ on: 'landed', block: 'a', seq: landed.seq, text: expect.stringContaining('a landed') }),
    ]);
  });

  it('never stalls a run on a dead webhook: the run lands every block while the hook hangs, and the failure is recorded', async () => {
    const hung: ServerResponse[] = [];
    const hook = await listen((_n, _body, res) => {
      hung.push(res); // never answered
    });
    repo = await makeProject({
      blocks: { a: {}, b: {} },
      sim: landingSim(['a', 'b']),
      config: config(`webhook = "${hook.url}"\non = ["landed", "run"]\ntimeout = "300ms"\nattempts = 2\nbackoff = "20ms"`),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    expect(
      ofType(run.events, 'block.landed')
        .map((e) => e.block)
        .sort(),
    ).toEqual(['a', 'b']);
    // The first landing's notification was hanging at the receiver while the run went on.
    const firstLanded = ofType(run.events, 'block.landed')[0]!;
    const after = run.events.filter((e) => e.seq > firstLanded.seq && e.type !== 'notify.failed');
    expect(after.map((e) => e.type)).toContain('run.finished');
    expect(hook.bodies.length).toBeGreaterThanOrEqual(2);
    const failed = deliveries(run).filter((d) => d.type === 'notify.failed');
    expect(failed.map((d) => d.on).sort()).toEqual(['landed', 'landed', 'run']);
    for (const d of failed) expect(d).toMatchObject({ channel: 'webhook', attempts: 2, error: expect.stringMatching(/timeout|aborted/i) });
  });

  it("says a stopped run's blocks still under way apart from the parked ones, which alone need an answer", async () => {
    const hook = await listen((_n, _body, res) => res.writeHead(200).end());
    scratch = mkdtempSync(join(tmpdir(), 'tron-notify-'));
    const notifier = new Notifier({
      config: { webhook: hook.url, format: 'text', on: ['run'], attempts: 1, backoffMs: 10, timeoutMs: 2000 },
      repo: scratch,
      runDir: scratch,
      record: () => true,
    });
    const bodies: EventBody[] = [
      { type: 'block.parked', block: 'stuck', reason: 'BLOCKED' },
      {
        type: 'run.finished',
        reason: 'signal',
        exit: 143,
        landed: [],
        parked: ['stuck', 'busy'],
        abandoned: [],
        detail: 'stopped by SIGINT',
      },
    ];
    for (const [i, b] of bodies.entries()) notifier.event({ v: 1, seq: i + 1, ts: i, ...b } as TronEvent);
    await notifier.close();
    expect(hook.bodies.map((b) => JSON.parse(b).text)).toEqual([
      expect.stringContaining('0 landed, 1 unfinished, 1 parked, 0 abandoned; parked: stuck'),
    ]);
  });

  it('is a checked table: an unknown key is an error, and it needs somewhere to deliver', () => {
    const base = configFile();
    const typo = parseConfig(`${base}\n[notify]\nwebhok = "https://example.invalid/x"\n`, '.tron/config.toml');
    expect(typo.problems.map((p) => p.code)).toContain('TRON_CONFIG_UNKNOWN_KEY');
    const nowhere = parseConfig(`${base}\n[notify]\non = ["page"]\n`, '.tron/config.toml');
    expect(nowhere.problems[0]).toMatchObject({ code: 'TRON_CONFIG_INVALID', message: expect.stringContaining('webhook') });
    const ok = parseConfig(`${base}\n[notify]\ncommand = ["notify-send"]\n`, '.tron/config.toml');
    expect(ok.config?.notify).toEqual({
      command: ['notify-send'],
      format: 'text',
      on: ['page', 'run'],
      attempts: 5,
      backoffMs: 1000,
      timeoutMs: 10000,
    });
  });
});

const HOSTILE = '<!channel> & <script>alert(1)</script> <https://evil.example|click>';

/** Every text Slack parses in a message: the fallback, mrkdwn sections, fields and context. */
function parsedTexts(message: {
  text: string;
  blocks: { type: string; text?: { type: string; text: string }; fields?: { text: string }[]; elements?: { text: string }[] }[];
}): string[] {
  const texts = [message.text];
  for (const b of message.blocks) {
    if (b.text?.type === 'mrkdwn') texts.push(b.text.text);
    for (const f of b.fields ?? []) texts.push(f.text);
    for (const e of b.elements ?? []) texts.push(e.text);
  }
  return texts;
}

describe('[notify] format', () => {
  it("posts Slack's incoming-webhook message — a header, the block's and run's fields, the message — with a hostile title escaped", async () => {
    const hook = await listen((_n, _body, res) => res.writeHead(200).end('ok'));
    repo = await makeProject({
      blocks: { a: { title: HOSTILE } },
      sim: landingSim(['a']),
      config: config(`webhook = "${hook.url}"\nformat = "slack"\non = ["landed", "run"]`),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    const runId = ofType(run.events, 'run.started')[0]!.run;
    const landed = ofType(run.events, 'block.landed')[0]!;
    const messages = hook.bodies.map((b) => JSON.parse(b));
    expect(messages).toHaveLength(2);
    const [first, last] = messages;
    expect(first.text).toBe(`tron: a landed (${landed.sha.slice(0, 12)}); trunk is at ${landed.top.slice(0, 12)}`);
    expect(first.blocks[0]).toEqual({ type: 'header', text: { type: 'plain_text', text: 'tron: a landed', emoji: false } });
    expect(first.blocks[1].fields.map((f: { text: string }) => f.text)).toEqual([
      expect.stringMatching(/^\*Repository\*\n/),
      `*Run*\n${runId}`,
      '*Block*\na: &lt;!channel&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt; &lt;https://evil.example|click&gt;',
      '*Outcome*\nlanded',
    ]);
    expect(first.blocks[2]).toEqual({ type: 'section', text: { type: 'mrkdwn', text: first.text } });
    expect(first.blocks.at(-1)).toEqual({
      type: 'context',
      elements: [{ type: 'mrkdwn', text: `seq ${landed.seq} · ${new Date(landed.ts).toISOString()}` }],
    });
    expect(last.blocks[0].text.text).toBe(`tron: Run ${runId} finished`);
    // Nothing the title brought in is left for Slack to read as a mention, a link or an entity.
    for (const text of parsedTexts(first)) {
      expect(text).not.toMatch(/[<>]/);
      expect(text).not.toMatch(/&(?!amp;|lt;|gt;)/);
    }
  });

  it("posts tron's own JSON object: kind, repo, run, block, title, outcome, message, url, at and the kind's detail", async () => {
    const hook = await listen((_n, _body, res) => res.writeHead(204).end());
    repo = await makeProject({
      blocks: { a: { title: 'Add the login page' } },
      sim: landingSim(['a']),
      config: config(`webhook = "${hook.url}"\nformat = "json"\non = ["landed", "run"]`),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    const runId = ofType(run.events, 'run.started')[0]!.run;
    const landed = ofType(run.events, 'block.landed')[0]!;
    const finished = ofType(run.events, 'run.finished')[0]!;
    const repoName = repo.dir.split('/').at(-1);
    expect(hook.bodies.map((b) => JSON.parse(b))).toEqual([
      {
        v: 1,
        kind: 'landed',
        repo: repoName,
        run: runId,
        block: 'a',
        title: 'Add the login page',
        outcome: 'landed',
        message: `tron: a landed (${landed.sha.slice(0, 12)}); trunk is at ${landed.top.slice(0, 12)}`,
        url: null,
        at: new Date(landed.ts).toISOString(),
        seq: landed.seq,
        detail: { sha: landed.sha, top: landed.top },
      },
      {
        v: 1,
        kind: 'run',
        repo: repoName,
        run: runId,
        block: null,
        title: null,
        outcome: 'finished',
        message: expect.stringContaining('1 landed, 0 parked, 0 abandoned'),
        url: null,
        at: new Date(finished.ts).toISOString(),
        seq: finished.seq,
        detail: { exit: 0, reason: 'done', landed: ['a'], parked: [], unfinished: [], abandoned: [] },
      },
    ]);
  });

  it("links a page to the block's issue: a Slack link whose address is escaped, and the json url as it is", async () => {
    const hook = await listen((_n, _body, res) => res.writeHead(200).end());
    scratch = mkdtempSync(join(tmpdir(), 'tron-notify-'));
    const url = 'https://forge.example/o/r/issues/7?a=1&b=<2>|x';
    const bodies: EventBody[] = [
      { type: 'register.loaded', blocks: [{ id: 'a', title: 'T & <b>', depends_on: [], priority: 0, criteria: [], digest: 'd' }] },
      { type: 'forge.commented', block: 'a', issue: 7, about: 'started', issue_url: url, posted: true },
      { type: 'page.sent', block: 'a', page: 'p', reason: 'BLOCKED: needs <a key>' },
    ];
    for (const format of ['slack', 'json'] as const) {
      const notifier = new Notifier({
        config: { webhook: hook.url, format, on: ['page'], attempts: 1, backoffMs: 10, timeoutMs: 2000 },
        repo: scratch,
        runDir: scratch,
        record: () => true,
      });
      for (const [i, b] of bodies.entries()) notifier.event({ v: 1, seq: i + 1, ts: 1_700_000_000_000 + i, ...b } as TronEvent);
      await notifier.close();
    }
    const [slack, json] = hook.bodies.map((b) => JSON.parse(b));
    expect(slack.blocks).toContainEqual({
      type: 'section',
      text: { type: 'mrkdwn', text: '<https://forge.example/o/r/issues/7?a=1&amp;b=&lt;2&gt;%7Cx|the issue of a>' },
    });
    expect(slack.text).toContain('BLOCKED: needs &lt;a key&gt;');
    expect(json).toMatchObject({ kind: 'page', block: 'a', title: 'T & <b>', outcome: 'parked', url, at: '2023-11-14T22:13:20.002Z' });
    expect(json.detail).toEqual({ reason: 'BLOCKED: needs <a key>', answer: expect.stringContaining("tron answer a '>>RETRY") });
  });

  it('refuses a format it does not know, naming the ones it does', () => {
    const bad = parseConfig(`${configFile()}\n[notify]\nwebhook = "https://example.invalid/x"\nformat = "teams"\n`, '.tron/config.toml');
    expect(bad.problems[0]).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: expect.stringContaining('notify.format') });
    expect(bad.problems[0]!.message).toMatch(/text.*slack.*json/);
  });
});
