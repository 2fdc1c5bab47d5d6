import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../os/clock.ts';
import type { EventBody, EventOf } from '../../core/events.ts';
import type { WorkerAdapter } from '../../workers/adapter.ts';
import type { EffectContext } from './context.ts';
import { probe } from './liveness.ts';
import { TurnTable } from './turn-table.ts';

/** The pid of a process that has exited: what a probe sees of a worker that just replied. */
async function exitedPid(): Promise<number> {
  const child = spawn('true');
  await new Promise((done) => child.once('exit', done));
  return child.pid!;
}

/**
 * A builder's turn whose process has exited, and whose turn ends (its reply reaching the
 * engine's queue) `endAfterMs` into the probe: the inputs in the order the engine takes them.
 */
async function probeAnExitedWorker(endAfterMs: number, probeWaitMs: number): Promise<string[]> {
  const repo = mkdtempSync(join(tmpdir(), 'tron-probe-'));
  onTestFinished(() => rmSync(repo, { recursive: true, force: true }));
  const inputs: string[] = [];
  const clock = new ManualClock(0);
  const turns = new TurnTable(clock, () => {});
  turns.start('b1', 'b1.1.builder', 1);
  const pid = await exitedPid();
  const worker = { kind: 'command', running: () => ({ pid, startTime: 0, outputBytes: 0 }) } as unknown as WorkerAdapter;
  const c = { repo, workers: { builder: worker }, turns, clock } as unknown as EffectContext;
  const decision = { type: 'worker.overran', block: 'b1', session: 'b1.1.builder', turn: 1, elapsed_ms: 1000 } as EventOf<'worker.overran'>;
  clock.after(endAfterMs, () => {
    turns.end('b1.1.builder', 1);
    inputs.push('reply.received');
  });
  let probed: EventBody | undefined;
  void Promise.resolve(probe.run(c, { decision, role: 'builder', phase: 'build', probeWaitMs })).then((p) => {
    probed = p as EventBody;
  });
  // The probe's waits are the clock's: it passes in steps of 10 ms, the probe's reads of the process running between them.
  while (!probed) await clock.pass(10);
  inputs.push(probed.type);
  return inputs;
}

describe('probing an overrun turn', () => {
  it('lets the reply of a worker that exited during the probe reach the engine before the probe does', async () => {
    // The turn ends 150 ms after the probe's wait: a worker whose adapter was still stopping
    // what it left running. The probe must not overtake the reply (decide would re-issue the turn).
    expect(await probeAnExitedWorker(250, 100)).toEqual(['reply.received', 'worker.probed']);
    expect(await probeAnExitedWorker(0, 100)).toEqual(['reply.received', 'worker.probed']);
  });

  it('reports an exited worker whose turn never ends, after a bounded wait', async () => {
    expect(await probeAnExitedWorker(60_000, 50)).toEqual(['worker.probed']);
  });
});
