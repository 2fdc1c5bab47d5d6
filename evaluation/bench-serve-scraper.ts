/**
 * The scraper of the serve bench (evaluation/bench-serve.ts), in a process of its own as a
 * Prometheus and a team's dashboard would be: `tsx bench-serve-scraper.ts URL TOKEN MS`.
 * Over and over, `MS` apart, it asks for `/metrics`, the first page of `/api/v1/runs`, the
 * page after it and the runs page's charts (`/api/v1/charts`), and times each answer. When stdin closes it prints one JSON line: the
 * requests made, the first (cold) answer of each route and the later ones' p50 and most, ms,
 * and any status other than 200.
 */
const [url, token, every] = process.argv.slice(2);
const headers = { authorization: `Bearer ${token}` };
const routes = ['metrics', 'api/v1/runs?limit=50', 'page2', 'api/v1/charts?days=30'] as const;
const times: Record<string, number[]> = Object.fromEntries(routes.map((r) => [r, []]));
const failures: string[] = [];
let stopping = false;

async function timed(route: string, path: string): Promise<string> {
  const start = performance.now();
  const res = await fetch(`${url}${path}`, { headers });
  const text = await res.text();
  times[route]!.push(performance.now() - start);
  if (res.status !== 200) failures.push(`${path}: ${res.status}`);
  return text;
}

async function loop(): Promise<void> {
  while (!stopping) {
    await timed('metrics', 'metrics');
    const first = JSON.parse(await timed('api/v1/runs?limit=50', 'api/v1/runs?limit=50')) as { next: string | null };
    if (first.next) await timed('page2', `api/v1/runs?limit=50&before=${first.next}`);
    await timed('api/v1/charts?days=30', 'api/v1/charts?days=30');
    await new Promise((r) => setTimeout(r, Number(every)));
  }
}

const running = loop();
process.stdin.resume();
process.stdin.on('end', async () => {
  stopping = true;
  await running;
  const summary = Object.fromEntries(
    Object.entries(times).map(([route, ms]) => {
      const later = ms.slice(1).sort((a, b) => a - b);
      return [route, { n: ms.length, first: ms[0], p50: later[Math.floor(later.length / 2)], most: later.at(-1) }];
    }),
  );
  process.stdout.write(`${JSON.stringify({ summary, failures: failures.slice(0, 5) })}\n`);
  process.exit(0);
});
