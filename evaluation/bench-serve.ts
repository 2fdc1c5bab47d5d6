/**
 * `tron serve` under load (part of `npm run bench`; alone: `npx tsx evaluation/bench-serve.ts`).
 *
 * A real engine (`tron start --watch`, in this process) on a real repository runs one
 * block whose builder always answers BLOCKED, so it parks again and again; a heartbeat
 * every millisecond makes the run append about a thousand events a second through the
 * engine's own append path. WAKE latency is measured the way the log itself can show it:
 * an answer written into `.tron/inbox/` (its `written_at`) to its `operator.answered` line
 * (its `ts`) — the engine's file-system wake-up, its inbox read, the step and the append.
 *
 * It is measured twice: with nobody watching, then with `tron serve` (its own process,
 * the real CLI) and 50 SSE clients (another process) following the run from its first
 * event; the clients stand for browsers elsewhere and run niced, `tron serve` does not. Printed: WAKE p50/p95 of each, the event rate, whether every client got every
 * seq once and in order, what a client joining late (behind the server's window) was
 * told, and the server's resident memory.
 *
 * Then the team's view: a thousand finished runs (copies of a real one, signed as the engine
 * signs) are put on disk beside the live run, `/metrics`, `/api/v1/runs` and `/api/v1/charts`
 * are asked once cold (every run read for the first time) and timed, and a scraper (another
 * process, evaluation/bench-serve-scraper.ts) asks for `/metrics`, two pages of runs and the
 * charts every 250 ms
 * — far more often than a Prometheus would — while WAKE is measured interleaved, the scraper
 * stopped (SIGSTOP) or running before each answer. Printed with the load it ran under.
 *
 * TRON_BENCH_SERVE=0 skips it; TRON_BENCH_SERVE_ANSWERS=15 and TRON_BENCH_SERVE_CLIENTS=50
 * change the answers per phase and the clients; TRON_BENCH_SERVE_RUNS=1000 and
 * TRON_BENCH_SERVE_SCRAPE_MS=250 the runs on disk and the scraper's pause.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism } from 'node:os';

import { fileURLToPath, pathToFileURL } from 'node:url';
import { systemClock } from '../engine/os/clock.ts';
import type { EventOf } from '../engine/core/events.ts';
import { startCommand } from '../engine/commands/start.ts';
import { writeAnswer } from '../engine/runtime/inbox.ts';
import { repoKey } from '../engine/log/keys.ts';
import { latestRun } from '../engine/log/runs.ts';
import { RunFollower, WINDOW } from '../engine/serve/follow.ts';
import { writePastRuns } from '../engine/testing/past-runs.ts';
import { landingSim, makeProject } from '../engine/testing/project.ts';
import { readLog } from '../engine/log/eventlog.ts';
import { GIT_IDENTITY_ENV } from '../engine/testing/repo.ts';
import { readSse } from '../engine/testing/sse.ts';

const BIN = fileURLToPath(new URL('../bin/tron.js', import.meta.url));
const CLIENTS = fileURLToPath(new URL('./bench-serve-clients.ts', import.meta.url));
const SCRAPER = fileURLToPath(new URL('./bench-serve-scraper.ts', import.meta.url));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`bench-serve: timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** The resident memory of a process, MB (Linux). */
function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** CPU seconds a process has used (Linux: utime + stime of /proc/PID/stat). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Answers the parked block `count` times; the WAKE latency of each, and the events appended meanwhile per second. */
async function wakes(
  repo: string,
  f: RunFollower,
  count: number,
  before: (i: number) => Promise<void> = async () => {},
): Promise<{ ms: number[]; rate: number }> {
  const key = repoKey(repo)!.key;
  const ms: number[] = [];
  const startSeq = f.last;
  const startAt = Date.now();
  for (let i = 0; i < count; i++) {
    await until(() => f.state.blocks.get('p')?.phase === 'parked', 'p to park');
    await before(i);
    const answered = f.answered.size;
    writeAnswer(repo, 'p', '>>RETRY {"guidance":"try again"}', systemClock, key);
    await until(() => f.answered.size > answered, 'operator.answered');
    const e = f.blockEvents('p', 50).findLast((x) => x.type === 'operator.answered') as EventOf<'operator.answered'>;
    ms.push(e.ts - e.written_at!);
  }
  return { ms, rate: ((f.last - startSeq) * 1000) / (Date.now() - startAt) };
}

export async function benchServe(): Promise<void> {
  if (process.env.TRON_BENCH_SERVE === '0') return;
  const answers = Number(process.env.TRON_BENCH_SERVE_ANSWERS ?? 15);
  const clientCount = Number(process.env.TRON_BENCH_SERVE_CLIENTS ?? 50);
  const blocked = Array.from({ length: 6 * answers + 10 }, () => `[[blocks.p.builder]]\nreply = '>>BLOCKED {"reason":"ask me"}'\n`).join(
    '\n',
  );
  const repo = await makeProject({ blocks: { p: {} }, sim: blocked });
  const stop = new AbortController();
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV };
  const run = startCommand({ repo: repo.dir, watch: true, heartbeatMs: 1, stop: stop.signal, clock: systemClock, env, print: () => {} });
  let serve: ChildProcess | undefined;
  let clients: ChildProcess | undefined;
  let scraper: ChildProcess | undefined;
  let poll: NodeJS.Timeout | undefined;
  try {
    await until(() => latestRun(repo.dir) !== undefined, 'the run directory');
    const f = new RunFollower(latestRun(repo.dir)!, { live: false });
    poll = setInterval(() => f.poke(), 10);
    console.log(
      `\nserve under load (a --watch run appending a heartbeat every ms; WAKE = answer written to .tron/inbox/ → operator.answered)`,
    );
    const alone = await wakes(repo.dir, f, answers);

    serve = spawn(process.execPath, [BIN, 'serve', '--repo', repo.dir, '--port', '0'], {
      env: process.env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    serve.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
    });
    await until(() => /#token=\S+/.test(out), 'tron serve to listen', 30_000);
    const [, url, token] = /dashboard\s+(\S+)#token=(\S+)/.exec(out)!;
    clients = spawn(process.execPath, ['--import', 'tsx', CLIENTS, url!, token!, String(clientCount)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let tallies = '';
    clients.stdout!.on('data', (c: Buffer) => {
      tallies += c.toString();
    });
    const rss: number[] = [];
    const sample = setInterval(() => rss.push(rssMb(serve!.pid!)), 200);
    sample.unref();
    // The clients read the backlog first; then the answers are timed.
    await sleep(1500);
    const cpuBefore = { serve: cpuSeconds(serve.pid!), engine: cpuSeconds(process.pid) };
    const wallBefore = Date.now();
    const watched = await wakes(repo.dir, f, answers);
    const wall = (Date.now() - wallBefore) / 1000;
    // The machine's load drifts: the same comparison again, interleaved — before each answer the server and the
    // clients are stopped (SIGSTOP: they take no CPU) or let go on, alternately.
    const both = [serve, clients];
    const interleaved = await wakes(repo.dir, f, 2 * answers, async (i) => {
      for (const p of both) p.kill(i % 2 === 0 ? 'SIGCONT' : 'SIGSTOP');
      await sleep(300);
    });
    for (const p of both) p.kill('SIGCONT');
    const live = interleaved.ms.filter((_, i) => i % 2 === 0);
    const stopped = interleaved.ms.filter((_, i) => i % 2 === 1);
    const cpu = { serve: (cpuSeconds(serve.pid!) - cpuBefore.serve) / wall, engine: (cpuSeconds(process.pid) - cpuBefore.engine) / wall };
    // A client that joins late, once the log is longer than the window, starts behind it: told of the gap, then served every event from the log.
    await until(() => f.last > 2 * WINDOW + 100, 'the log to outgrow the window', 120_000);
    const target = f.last;
    const late = await readSse(`${url}api/v1/events`, { token: token!, until: (m) => m.event === 'message' && Number(m.id) >= target });
    const lateSeqs = late.messages.filter((m) => m.event === 'message').map((m) => Number(m.id));
    const lateWhole = lateSeqs.every((s, i) => s === i + 1);
    clearInterval(sample);
    clients.stdin!.end();
    await until(() => tallies.includes('\n'), 'the clients’ tallies', 30_000);
    const t = JSON.parse(tallies) as { received: number; gaps: number; whole: boolean }[];

    const line = (name: string, r: { ms: number[]; rate: number }) =>
      console.log(
        `${name.padEnd(44)} WAKE p50 ${String(percentile(r.ms, 50)).padStart(4)} ms, p95 ${String(percentile(r.ms, 95)).padStart(4)} ms (n=${r.ms.length}); ${Math.round(r.rate)} events/s`,
      );
    line('no clients', alone);
    line(`tron serve + ${clientCount} SSE clients`, watched);
    line('interleaved: serve and clients stopped', { ms: stopped, rate: interleaved.rate });
    line('interleaved: serve and clients running', { ms: live, rate: interleaved.rate });
    const p50a = percentile(stopped, 50);
    const p50w = percentile(live, 50);
    console.log(
      `WAKE p50 interleaved, running / stopped: ${p50w} / ${p50a} ms (goal: unchanged, within 1 ms or 25%: ${p50w <= Math.max(p50a + 1, p50a * 1.25) ? 'met' : 'MISSED'})`,
    );
    const received = t.map((x) => x.received);
    console.log(
      `clients whole (every seq once, in order): ${t.filter((x) => x.whole).length}/${t.length}; told of a gap: ${t.filter((x) => x.gaps > 0).length}; events each: ${Math.min(...received)}…${Math.max(...received)}`,
    );
    console.log(
      `a late client from seq 1 (${target} events, window ${WINDOW}): ${late.messages.filter((m) => m.event === 'gap').length} gap told, then ${lateSeqs.length} events, ${lateWhole ? 'whole' : 'NOT WHOLE'}`,
    );
    console.log(
      `CPU while timed with clients: tron serve ${(cpu.serve * 100).toFixed(0)}% of a core, the engine's process ${(cpu.engine * 100).toFixed(0)}%; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]} on ${availableParallelism()} cores`,
    );
    console.log(
      `tron serve resident memory: first ${rss[0]?.toFixed(0)} MB, most ${Math.max(...rss).toFixed(0)} MB (log: ${f.last} events)`,
    );

    // The team's view: many finished runs on disk, /metrics and /api/v1/runs asked over and over.
    const pastCount = Number(process.env.TRON_BENCH_SERVE_RUNS ?? 1000);
    const scrapeMs = Number(process.env.TRON_BENCH_SERVE_SCRAPE_MS ?? 250);
    const template = await makeProject({ blocks: { a: {}, b: {} }, sim: landingSim(['a', 'b']) });
    // Its own process: a second engine in this one would share it with the engine under test.
    const made = spawn(process.execPath, [BIN, 'start', '--repo', template.dir], {
      env: { ...process.env, ...GIT_IDENTITY_ENV },
      stdio: 'ignore',
    });
    await new Promise((r) => made.once('exit', r));
    const finished = readLog(join(latestRun(template.dir)!, 'events.jsonl')).events;
    await template.cleanup();
    writePastRuns(repo.dir, finished, pastCount);
    const ask = async (path: string) => {
      const start = performance.now();
      const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`bench-serve: ${path} answered ${res.status}: ${text.slice(0, 200)}`);
      return { ms: performance.now() - start, text };
    };
    const coldRuns = await ask('api/v1/runs?limit=50');
    const coldMetrics = await ask('metrics');
    const coldCharts = await ask('api/v1/charts?days=366');
    const landedLine = /^tron_blocks_landed_total (\d+)$/m.exec(coldMetrics.text)?.[1];
    scraper = spawn(process.execPath, ['--import', 'tsx', SCRAPER, url!, token!, String(scrapeMs)], { stdio: ['pipe', 'pipe', 'inherit'] });
    let scraped = '';
    scraper.stdout!.on('data', (c: Buffer) => {
      scraped += c.toString();
    });
    await sleep(1000);
    const cpuAt = { serve: cpuSeconds(serve.pid!), wall: Date.now() };
    const scrapedWakes = await wakes(repo.dir, f, 2 * answers, async (i) => {
      scraper!.kill(i % 2 === 0 ? 'SIGCONT' : 'SIGSTOP');
      await sleep(300);
    });
    scraper.kill('SIGCONT');
    const serveCpu = (cpuSeconds(serve.pid!) - cpuAt.serve) / ((Date.now() - cpuAt.wall) / 1000);
    scraper.stdin!.end();
    await until(() => scraped.includes('\n'), 'the scraper’s tally', 30_000);
    const { summary, failures } = JSON.parse(scraped) as {
      summary: Record<string, { n: number; first: number; p50: number; most: number }>;
      failures: string[];
    };
    const scraping = scrapedWakes.ms.filter((_, i) => i % 2 === 0);
    const quiet = scrapedWakes.ms.filter((_, i) => i % 2 === 1);
    console.log(
      `\nteam's view: ${pastCount} finished runs on disk + the live run (${f.last} events); a scraper every ${scrapeMs} ms asking /metrics, two pages of /api/v1/runs and /api/v1/charts`,
    );
    console.log(
      `cold (every run read once): /api/v1/runs ${coldRuns.ms.toFixed(0)} ms, /metrics ${coldMetrics.ms.toFixed(0)} ms (tron_blocks_landed_total ${landedLine}), /api/v1/charts ${coldCharts.ms.toFixed(0)} ms`,
    );
    for (const [route, x] of Object.entries(summary)) {
      console.log(`  ${route.padEnd(28)} n=${x.n}, warm p50 ${x.p50?.toFixed(1)} ms, most ${x.most?.toFixed(1)} ms`);
    }
    if (failures.length > 0) console.log(`  NOT 200: ${failures.join('; ')}`);
    line('interleaved: scraper stopped', { ms: quiet, rate: scrapedWakes.rate });
    line('interleaved: scraper running', { ms: scraping, rate: scrapedWakes.rate });
    const q50 = percentile(quiet, 50);
    const s50 = percentile(scraping, 50);
    console.log(
      `WAKE p50 with ${pastCount} runs on disk, scraped / not: ${s50} / ${q50} ms (goal: unchanged, within 1 ms or 25%: ${s50 <= Math.max(q50 + 1, q50 * 1.25) ? 'met' : 'MISSED'}); tron serve ${(serveCpu * 100).toFixed(0)}% of a core; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]} on ${availableParallelism()} cores`,
    );
  } finally {
    clearInterval(poll);
    clients?.kill();
    scraper?.kill('SIGCONT');
    scraper?.kill();
    serve?.kill();
    stop.abort();
    await run.catch(() => undefined);
    await repo.cleanup();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await benchServe();
