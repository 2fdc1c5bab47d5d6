/**
 * A shrunk failing run, written as a SIM template (evaluation/templates/ format): the
 * blocks and config it ran with, each worker turn it took as a scripted turn of the `sim`
 * adapter (a commit for honest work, a failing test for red work, the reply, a failure or
 * a hang), one start per engine start with the crash at the event the simulated engine
 * died after, and the outcome the real engine reaches on that schedule as its expectation.
 * It is a starting point for a golden run: `npx tron sim <name>` runs it on real git, and
 * `--record` keeps it once it passes (real git and real timing may take a path the
 * simulated world did not).
 */
import TOML from '@iarna/toml';
import type { EventOf, TronEvent } from '../../engine/core/events.ts';
import { describeSchedule, type Shrunk } from './shrink.ts';
import { rerun } from './search.ts';
import { REAL, type RunResult } from './run.ts';

const TEST_JS = `const { readdirSync } = require('node:fs');
for (const f of readdirSync(__dirname + '/tests').filter((f) => f.endsWith('.test.js')).sort()) require('./tests/' + f);
`;

/**
 * Points of the schedule whose faults a template cannot play on real git: the harness
 * scripts worker turns, config, starts and kills, and answers between starts — not a
 * teammate's push at a chosen moment, a remote's one refusal, a signal, a failed effect,
 * a planted ref, a flaky or timed-out test, or a rebase's outcome.
 */
const UNPLAYABLE = new Set(['external', 'fetch', 'push', 'test', 'rebase', 'cluster', 'commit']);

/**
 * What of a run (the real engine's, on the reproduction's schedule) its template cannot
 * play on real git, named; empty when the template plays it all.
 */
export function unplayable(real: RunResult): string[] {
  const out = describeSchedule(real.choices, real.points).filter((f) => UNPLAYABLE.has(f.split(' ')[1]!.split('=')[0]!));
  // The world's forge answers are not staged as [forge] faults and people: the template lands by push.
  if (real.config.pr) out.push('the run lands through pull requests ([forge] land = "pr"); the template lands by push');
  // The cluster's engines, agents, database faults and the other repository are the world's (cluster.ts): a template runs one engine.
  if (real.config.cluster)
    out.push('the run is on a cluster (a database, standbys, agents, another repository); the template runs one engine');

  real.logs.forEach((log, i) => {
    const boot = log.findIndex((e) => e.type === 'recovery.finished');
    if (log.some((e, at) => at > boot && e.type === 'operator.answered')) out.push(`start ${i + 1}: the operator answers during the run`);
  });
  return out;
}

/** The template's TOML text. */
export function renderTemplate(s: Shrunk, o: { mutation?: string } = {}): string {
  const r = s.checked.result;
  const v = s.checked.violation!;
  const cfg = r.config;
  // What the unmutated engine does on the same schedule: the run the template plays on
  // real git (the harness runs the real engine), its turns and starts, and its outcome.
  const real = rerun(s.case, REAL).result;
  const notPlayed = unplayable(real);
  const script: Record<string, Record<string, Record<string, unknown>[]>> = {};
  const runs: Record<string, unknown>[] = [];
  real.logs.forEach((log, i) => {
    for (const d of log) {
      if (d.type !== 'block.dispatched' || d.role === 'operator') continue;
      const turn = scripted(d, log);
      if (!turn) continue;
      const roles = script[d.block] ?? {};
      script[d.block] = roles;
      roles[d.role] = [...(roles[d.role] ?? []), turn];
    }
    // A start the simulated engine died in: killed after the same event on real git
    // (found by pattern, as seqs differ: the real log holds more notes).
    const answers = answersBefore(log);
    const crashed = i < real.logs.length - 1 && log.at(-1) !== undefined && log.at(-1)!.type !== 'run.finished';
    runs.push({ ...(crashed ? { crash_after: crashPattern(log) } : {}), ...answers });
  });
  const finished = real.logs.at(-1)!.findLast((e): e is EventOf<'run.finished'> => e.type === 'run.finished');
  const doc = {
    title: `Simulator seed ${s.case.seed}: ${v.invariant}${o.mutation ? ` (planted: ${o.mutation})` : ''}`,
    about: [
      `Written by the simulator (evaluation/simulator/) from seed ${s.case.seed}, shrunk to ${s.after} fault(s):`,
      ...describeSchedule(s.case.choices, r.points).map((x) => `  ${x}`),
      `${o.mutation ? `With the planted mutation ${o.mutation}` : 'The engine'} broke ${v.invariant}: ${v.message.split('\n')[0]}`,
      `Replay it: npm run simulate -- --replay <the .json written beside this file>.`,
      `The expectation is what the real engine does on this schedule in the simulated world.`,
      ...(notPlayed.length > 0 ? ['Not played on real git (edit the template to stage them):', ...notPlayed.map((x) => `  ${x}`)] : []),
    ].join('\n'),
    timeout: '180s',
    repo: { files: { 'test.js': TEST_JS, 'tests/base.test.js': "require('node:assert').ok(true);\n" } },
    config: {
      max_parallel: cfg.maxParallel,
      ...(cfg.architect ? { architect: true } : {}),
      merge: { batch: cfg.batch, verify_trunk: cfg.verifyTrunk, gather: cfg.gather, speculate: cfg.speculate },
      ...(Object.keys(cfg.budgets).length > 0 ? { budgets: cfg.budgets } : {}),
    },
    // A teammate's push is staged by the world at its moment, which a template cannot: listed by unplayable() instead.
    ...(cfg.remote ? { remote: {} } : {}),
    blocks: Object.fromEntries(
      cfg.blocks.map((b) => [b.id, { criteria: b.criteria, ...(b.depends_on.length > 0 ? { depends_on: b.depends_on } : {}) }]),
    ),
    script,
    runs,
    expect: {
      exit: finished?.exit ?? 1,
      phases: Object.fromEntries(cfg.blocks.map((b) => [b.id, real.phases[b.id] ?? 'pending'])),
    },
  };
  return `# Generated by evaluation/simulator/template.ts (a shrunk simulator run); edit freely once it is a golden run.\n${TOML.stringify(doc as unknown as TOML.JsonMap)}`;
}

/** The last event of a crashed start, as a pattern that picks it out of the real log: its type and identifying fields, and which of that kind it was. */
function crashPattern(log: readonly TronEvent[]): Record<string, unknown> {
  const last = log.at(-1)! as unknown as Record<string, unknown>;
  const pattern: Record<string, unknown> = { type: last.type };
  for (const key of ['block', 'role', 'kind', 'session', 'turn', 'attempt', 'word', 'purpose', 'trouble', 'handler']) {
    if (last[key] !== undefined) pattern[key] = last[key];
  }
  return pattern;
}

/** Operator answers the simulated operator gave before a start (read from its boot): `tron answer` before it. */
function answersBefore(log: readonly TronEvent[] | undefined): Record<string, unknown> {
  if (!log) return {};
  const boot = log.slice(0, log.findIndex((e) => e.type === 'recovery.finished') + 1);
  const answers = boot
    .filter((e): e is EventOf<'operator.answered'> => e.type === 'operator.answered')
    .map((e) => ({ block: e.block, reply: `>>${e.word} ${JSON.stringify(e.payload)}` }));
  return answers.length > 0 ? { answers } : {};
}

/** One dispatched turn as a sim script entry, from its reply in the same log. */
function scripted(d: EventOf<'block.dispatched'>, log: readonly TronEvent[]): Record<string, unknown> | undefined {
  const reply = log.find(
    (e): e is EventOf<'reply.received'> => e.type === 'reply.received' && e.session === d.session && e.turn === d.turn,
  );
  const overran = log.some((e) => e.type === 'timer.fired' && e.session === d.session && e.turn === d.turn);
  const entry: Record<string, unknown> = { kind: d.kind };
  if (!reply) return overran ? { ...entry, hang: true } : undefined;
  if (!reply.ok) {
    if (reply.failure === 'aborted') return overran ? { ...entry, hang: true } : { ...entry, sleep: '5s' };
    return { ...entry, exit: 1, stdout: reply.detail ?? 'failed' };
  }
  const text = (reply.reply ?? '').trim();
  if (overran) entry.sleep = '3s';
  const word = /^>>([A-Z_]+)/m.exec(text)?.[1];
  if (d.role === 'builder' && (d.kind === 'build' || d.restating === 'build') && word === 'DONE') {
    const n = d.turn;
    entry.write = { [`${d.block}.js`]: `exports.turn = ${n};\n`, [`tests/${d.block}.test.js`]: "require('node:assert').ok(true);\n" };
    entry.commit = `Work on ${d.block}, turn ${n}`;
  }
  if (d.kind === 'merge' && word === 'MERGED') entry.rebase = true;
  entry.reply = text;
  return entry;
}
