/**
 * The simulator's speed (evaluation/simulator/): simulated steps — inputs through the pure
 * step, with the world's answers and every invariant checked — per second, on one thread,
 * over a fixed seed range (so two measurements run the same work). `npm run bench` prints
 * it; `npx tsx evaluation/bench-simulator.ts` alone.
 */
import { search } from './simulator/search.ts';

export function benchSimulator(seeds = Number(process.env.TRON_BENCH_SIM_SEEDS ?? 600)): void {
  search({ from: 1, runs: 50 }); // warm up the JIT
  const r = search({ from: 1, runs: seeds });
  const perSecond = (r.steps / r.ms) * 1000;
  console.log(
    `${'simulator: steps/s, one thread'.padEnd(44)} ${Math.round(perSecond).toLocaleString('en-US').padStart(10)} steps/s  ` +
      `(${seeds} seeds, ${r.steps.toLocaleString('en-US')} steps, ${Math.round((seeds / r.ms) * 1000)} seeds/s)`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) benchSimulator();
