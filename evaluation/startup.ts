/**
 * How long `tron --version` takes to start, next to a bare `node -e 0`: the cost of
 * tron's own start-up (the bin, the freshness check, loading the CLI) on top of Node's.
 * The target is at most 4× a bare Node start. Measured on the compiled code, built first
 * if the sources are newer; the median of many runs, since one start is noisy.
 */
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { distIsFresh } from '../bin/dist-fresh.js';
import { TRON_ROOT, tronPath } from '../engine/root.ts';

/** Median wall time of `runs` runs of `node args…`, in ms. */
function median(args: string[], runs: number): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const start = performance.now();
    const r = spawnSync(process.execPath, args, { stdio: 'ignore' });
    times.push(performance.now() - start);
    if (r.status !== 0) throw new Error(`node ${args.join(' ')} exited ${r.status}`);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** Prints both medians and their ratio. */
export function benchStartup(runs = 21): void {
  if (!distIsFresh(TRON_ROOT)) {
    const built = spawnSync(process.execPath, [tronPath('bin', 'build.js')], { stdio: 'inherit' });
    if (built.status !== 0) throw new Error('npm run build failed');
  }
  const bin = tronPath('bin', 'tron.js');
  // One of each first, so the file cache is warm for both.
  median(['-e', '0'], 1);
  median([bin, '--version'], 1);
  const node = median(['-e', '0'], runs);
  const tron = median([bin, '--version'], runs);
  const ratio = tron / node;
  console.log(`${'start-up: node -e 0'.padEnd(44)} ${node.toFixed(1).padStart(10)} ms    (median of ${runs})`);
  console.log(`${'start-up: tron --version'.padEnd(44)} ${tron.toFixed(1).padStart(10)} ms    (median of ${runs})`);
  console.log(
    `${'start-up: ratio (target ≤ 4×)'.padEnd(44)} ${ratio.toFixed(2).padStart(10)} ×    ${ratio <= 4 ? 'within' : 'OVER'} the target`,
  );
}
