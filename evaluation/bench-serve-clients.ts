/**
 * The SSE clients of the serve bench (evaluation/bench-serve.ts), in a process of their
 * own so that reading the stream costs the engine's process nothing but what a real
 * dashboard's would: `tsx bench-serve-clients.ts URL TOKEN N`. Each client reads
 * `/api/v1/events` from the first event and checks that every seq arrives once, in
 * order. When stdin closes, it prints one JSON line: per client the count, the gaps it
 * was told of, and whether its seqs were whole.
 */
import { setMaxListeners } from 'node:events';
import { readSse } from '../engine/testing/sse.ts';

const [url, token, n] = process.argv.slice(2);
const stop = new AbortController();
setMaxListeners(0, stop.signal);

interface Tally {
  received: number;
  last: number;
  gaps: number;
  whole: boolean;
}

function client(): { tally: Tally; done: Promise<unknown> } {
  const tally: Tally = { received: 0, last: 0, gaps: 0, whole: true };
  const done = readSse(`${url}api/v1/events`, {
    token: token!,
    signal: stop.signal,
    onMessage: (m) => {
      if (m.event === 'gap') tally.gaps++;
      if (m.event !== 'message') return;
      const seq = Number(m.id);
      if (seq !== tally.last + 1) tally.whole = false;
      tally.last = seq;
      tally.received++;
    },
  }).catch(() => undefined);
  return { tally, done };
}

const clients = Array.from({ length: Number(n) }, client);
process.stdin.resume();
process.stdin.on('end', async () => {
  stop.abort();
  await Promise.all(clients.map((c) => c.done));
  process.stdout.write(`${JSON.stringify(clients.map((c) => c.tally))}\n`);
  process.exit(0);
});
