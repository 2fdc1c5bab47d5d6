/**
 * The push path's cost per stack (part of `npm run bench`): what a landing costs with
 * `[remote]` against without, on real git. One repository lands a run of stacks of three
 * blocks each, one after another:
 *
 * - local: the ref transaction and the user's checkout (`landStack`), as without a remote;
 * - remote (git daemon, and smart HTTP with basic auth, both on 127.0.0.1): the fetch
 *   before the stack, the one atomic push (trunk by lease, three landed refs), then the
 *   same local transaction — what the lane does per stack with `[remote]`.
 *
 * It prints the median ms per stack of each part. TRON_BENCH_REMOTE=0 skips it;
 * TRON_BENCH_REMOTE_STACKS=20 changes how many stacks each configuration lands.
 */
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import * as git from '../engine/git/index.ts';
import { fetchTrunk, openRemote, pushLanding, type Remote } from '../engine/git/remote.ts';
import { makeBareRemote, serveDaemon, serveHttp, type BareRemote, type ServedRemote } from '../engine/testing/remote-server.ts';
import { makeRepo, type TestRepo } from '../engine/testing/repo.ts';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const BLOCKS_PER_STACK = 3;

/** Commits three blocks on a side branch over trunk: the stack's blocks (each its own commit) and its top. */
async function stackOf(repo: TestRepo, n: number): Promise<{ from: string; top: string; blocks: Array<{ id: string; sha: string }> }> {
  const from = await repo.git('rev-parse', 'main');
  await repo.git('checkout', '-q', '--detach', from);
  const blocks: Array<{ id: string; sha: string }> = [];
  for (let i = 0; i < BLOCKS_PER_STACK; i += 1) {
    const id = `s${n}b${i}`;
    await repo.write(`items/${id}.txt`, `${id}\n`);
    blocks.push({ id, sha: await repo.commitAll(`Add ${id}`) });
  }
  await repo.git('checkout', '-q', 'main');
  return { from, top: blocks.at(-1)!.sha, blocks };
}

interface Parts {
  fetch: number[];
  push: number[];
  local: number[];
}

async function landLocally(repo: TestRepo, s: { from: string; top: string; blocks: Array<{ id: string; sha: string }> }): Promise<number> {
  const t = performance.now();
  const landed = await git.landStack(repo.dir, { trunk: 'main', expectedOld: s.from, top: s.top, blocks: s.blocks });
  if (!landed.ok) throw new Error(`local landing refused: ${landed.reason}`);
  return performance.now() - t;
}

async function run(kind: 'local' | 'daemon' | 'http', stacks: number): Promise<Parts> {
  const repo = await makeRepo({ 'items/.keep': '' });
  let bare: BareRemote | undefined;
  let served: ServedRemote | undefined;
  let home: string | undefined;
  let remote: Remote | undefined;
  try {
    if (kind !== 'local') {
      bare = await makeBareRemote();
      await repo.git('push', '-q', bare.dir, 'main');
      const auth = { user: 'bench', password: 'bench-pass' };
      served = kind === 'daemon' ? await serveDaemon(bare) : await serveHttp(bare, auth);
      await repo.git('remote', 'add', 'origin', served.url);
      home = await mkdtemp(join(tmpdir(), 'tron-bench-home-'));
      const store = join(home, 'creds');
      await writeFile(store, `http://${auth.user}:${auth.password}@127.0.0.1:${served.port}\n`);
      const access = { config: [['credential.helper', `store --file=${store}`]] as const, env: {} };
      remote = await openRemote(repo.dir, { name: 'origin', trunk: 'main', timeoutMs: 60_000, access });
    }
    const parts: Parts = { fetch: [], push: [], local: [] };
    for (let n = 0; n < stacks; n += 1) {
      const s = await stackOf(repo, n);
      if (remote) {
        let t = performance.now();
        const fetched = await fetchTrunk(repo.dir, remote);
        if (!fetched.ok) throw new Error(`fetch failed: ${fetched.message}`);
        parts.fetch.push(performance.now() - t);
        t = performance.now();
        const pushed = await pushLanding(repo.dir, remote, { expectedOld: s.from, top: s.top, blocks: s.blocks });
        if (!pushed.ok) throw new Error(`push refused: ${pushed.message}`);
        parts.push.push(performance.now() - t);
      }
      parts.local.push(await landLocally(repo, s));
    }
    return parts;
  } finally {
    await served?.stop();
    await bare?.cleanup();
    if (home) await rm(home, { recursive: true, force: true });
    await repo.cleanup();
  }
}

function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export async function benchRemote(): Promise<void> {
  if (process.env.TRON_BENCH_REMOTE === '0') return;
  const stacks = Number(process.env.TRON_BENCH_REMOTE_STACKS ?? 20);
  console.log(`\nthe push path: ms per stack of ${BLOCKS_PER_STACK} blocks (median of ${stacks} stacks landed one after another)`);
  console.log(`${'landing'.padEnd(34)} ${'fetch'.padStart(7)} ${'push'.padStart(7)} ${'local'.padStart(7)} ${'total'.padStart(7)}`);
  for (const kind of ['local', 'daemon', 'http'] as const) {
    const p = await run(kind, stacks);
    const [f, u, l] = [median(p.fetch), median(p.push), median(p.local)];
    const label = kind === 'local' ? 'local (no [remote])' : kind === 'daemon' ? 'remote: git daemon' : 'remote: smart HTTP, basic auth';
    const cell = (x: number, used: boolean) => (used ? x.toFixed(1) : '-').padStart(7);
    console.log(
      `${label.padEnd(34)} ${cell(f, kind !== 'local')} ${cell(u, kind !== 'local')} ${cell(l, true)} ${(f + u + l).toFixed(1).padStart(7)}`,
    );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await benchRemote();
