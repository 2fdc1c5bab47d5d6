/**
 * Checking a template's runs against its expectation. The checks on events are pure:
 * `differences(template, runs)` lists, in words, everything that differs — exit status,
 * final phases, landed order, events that must or must not appear — plus the
 * invariants every scenario must keep whatever its expectation (no block lands twice,
 * every recorded run replays to the identical decisions). Git checks (trunk files,
 * landed refs, linear trunk) are in `gitDifferences`.
 */
import { execa } from 'execa';
import { EVENT_SCHEMAS, type TronEvent } from '../engine/core/events.ts';
import { apply, initialState } from '../engine/core/state.ts';
import type { ReplayOutcome } from '../engine/commands/replay.ts';
import type { EventPattern, Template } from './template.ts';

/** One `tron start` of a template, as the harness saw it. */
export interface RunRecord {
  /** 1, 2, … */
  index: number;
  /** undefined when the start crashed by design or did not finish. */
  exit: number | undefined;
  events: TronEvent[];
  runDir: string | undefined;
  output: string[];
  /** The N of TRON_CRASH_AFTER_EVENT this start ran with. */
  crashAt?: number;
  replay: ReplayOutcome | undefined;
  /** Why the start could not be carried out at all (a thrown error, a timeout). */
  error?: string;
}

const show = (x: unknown) => JSON.stringify(x);

/**
 * Whether `actual` holds everything `expected` says: objects partially, arrays as
 * subsets, and a string written `/…/` as a regular expression the value must match.
 */
export function holds(actual: unknown, expected: unknown): boolean {
  if (typeof expected === 'string' && expected.length >= 2 && expected.startsWith('/') && expected.endsWith('/')) {
    return typeof actual === 'string' && new RegExp(expected.slice(1, -1)).test(actual);
  }
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && expected.every((want) => actual.some((have) => holds(have, want)));
  }
  if (typeof expected === 'object' && expected !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([k, v]) => holds((actual as Record<string, unknown>)[k], v));
  }
  return actual === expected;
}

/** A pattern in words: its type and fields. */
export function describePattern(p: EventPattern): string {
  const { type, times: _times, ...fields } = p;
  return Object.keys(fields).length > 0 ? `${type} ${show(fields)}` : type;
}

/** Whether one event matches a pattern. */
export function matches(e: TronEvent, p: EventPattern): boolean {
  const { times: _times, ...want } = p;
  return holds(e, want);
}

/** Events matching a pattern, tagged with the start they came from. */
function find(runs: readonly RunRecord[], p: EventPattern): Array<{ run: number; event: TronEvent }> {
  return runs.flatMap((r) => r.events.filter((e) => matches(e, p)).map((event) => ({ run: r.index, event })));
}

function patternDifferences(
  runs: readonly RunRecord[],
  must: readonly EventPattern[],
  mustNot: readonly EventPattern[],
  where: string,
): string[] {
  const out: string[] = [];
  for (const p of [...must, ...mustNot]) {
    if (!Object.hasOwn(EVENT_SCHEMAS, p.type)) out.push(`${where}event type ${p.type} is not in the event table (engine/core/events.ts)`);
  }
  for (const p of must) {
    const found = find(runs, p);
    if (p.times === undefined && found.length === 0) out.push(`${where}expected an event ${describePattern(p)}; none appeared`);
    if (p.times !== undefined && found.length !== p.times)
      out.push(`${where}expected ${p.times} event(s) ${describePattern(p)}; found ${found.length}`);
  }
  for (const p of mustNot) {
    const found = find(runs, p);
    if (found.length > 0) {
      const first = found[0]!;
      out.push(
        `${where}expected no event ${describePattern(p)}; found ${found.length}, the first at run ${first.run} seq ${first.event.seq}: ${show(first.event)}`,
      );
    }
  }
  return out;
}

/** The phase of every block after the last start, folded from its events. */
export function finalPhases(runs: readonly RunRecord[]): Record<string, string> {
  const last = runs.at(-1);
  if (!last) return {};
  const state = last.events.reduce(apply, initialState());
  return Object.fromEntries([...state.blocks.values()].map((b) => [b.id, b.phase]));
}

/** Everything in the runs that differs from the template's expectation or breaks an invariant. */
export function differences(t: Template, runs: readonly RunRecord[]): string[] {
  const out: string[] = [];
  for (const r of runs) if (r.error) out.push(`run ${r.index}: ${r.error}`);
  const last = runs.at(-1);
  if (last && last.exit !== t.expect.exit) out.push(`exit: expected ${t.expect.exit}, got ${last.exit ?? '(none)'}`);
  const phases = finalPhases(runs);
  for (const [id, want] of Object.entries(t.expect.phases)) {
    if (phases[id] !== want) out.push(`phase of ${id}: expected ${want}, got ${phases[id] ?? '(unknown)'}`);
  }
  const landed = runs.flatMap((r) => r.events.filter((e) => e.type === 'block.landed').map((e) => (e as { block: string }).block));
  for (const [a, b] of t.expect.landed_before) {
    const ia = landed.indexOf(a);
    const ib = landed.indexOf(b);
    if (ia < 0 || ib < 0) out.push(`landed order: expected ${a} before ${b}, but ${ia < 0 ? a : b} never landed`);
    else if (ia > ib) out.push(`landed order: expected ${a} before ${b}, but ${b} landed first`);
  }
  out.push(...patternDifferences(runs, t.expect.events, t.expect.absent, ''));
  t.runs.forEach((spec, i) => {
    const r = runs[i];
    if (!r) return;
    const where = `run ${r.index}: `;
    if (spec.exit !== undefined && r.exit !== spec.exit) out.push(`${where}exit: expected ${spec.exit}, got ${r.exit ?? '(none)'}`);
    out.push(...patternDifferences([r], spec.events, spec.absent, where));
    if (r.crashAt !== undefined) {
      const end = r.events.at(-1);
      const at = `${end?.type ?? '(nothing)'} at seq ${end?.seq ?? 0}`;
      if (r.events.some((e) => e.type === 'run.finished'))
        out.push(`${where}the crash hook did not stop the engine: the log ends with run.finished`);
      else if (end?.seq !== r.crashAt) out.push(`${where}the crash hook was set at seq ${r.crashAt}, but the log ends with ${at}`);
      else if (spec.last_event && end.type !== spec.last_event) out.push(`${where}the crashed log ends with ${at}, not ${spec.last_event}`);
      else if (spec.crash_after && !matches(end, spec.crash_after))
        out.push(`${where}the crashed log ends with ${at}, not ${describePattern(spec.crash_after)}`);
    }
  });
  out.push(...invariantDifferences(runs));
  return out;
}

/** What every scenario must keep: no block lands twice, every run replays identically. */
function invariantDifferences(runs: readonly RunRecord[]): string[] {
  const out: string[] = [];
  const times = new Map<string, number>();
  for (const r of runs) {
    for (const e of r.events) if (e.type === 'block.landed') times.set(e.block, (times.get(e.block) ?? 0) + 1);
  }
  for (const [id, n] of times) if (n > 1) out.push(`invariant: ${id} landed ${n} times`);
  for (const r of runs) {
    const result = r.replay?.result;
    if (!result || result.ok) continue;
    const d = result.divergence;
    out.push(
      `invariant: run ${r.index} does not replay: at seq ${d.seq} (input seq ${d.input.seq}, ${d.input.type}) recorded ${show(d.recorded ?? null)}, derived ${show(d.derived ?? null)}`,
    );
  }
  return out;
}

/** Checks in git: trunk files, one landed ref per landed block at its sha, a linear trunk. */
export async function gitDifferences(t: Template, runs: readonly RunRecord[], repo: string): Promise<string[]> {
  const git = async (...args: string[]) => (await execa('git', args, { cwd: repo, reject: false })).stdout.trim();
  const out: string[] = [];
  for (const [path, want] of Object.entries(t.expect.trunk_files)) {
    const result = await execa('git', ['show', `main:${path}`], { cwd: repo, reject: false, stripFinalNewline: false });
    const have = result.exitCode === 0 ? String(result.stdout) : undefined;
    if (have !== want) out.push(`trunk file ${path}: expected ${show(want)}, got ${have === undefined ? '(no such file)' : show(have)}`);
  }
  const refs = new Map(
    (await git('for-each-ref', '--format=%(refname:strip=3) %(objectname)', 'refs/tron/landed/'))
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split(' ') as [string, string]),
  );
  for (const r of runs) {
    for (const e of r.events) {
      if (e.type === 'block.landed' && refs.get(e.block) !== e.sha)
        out.push(`invariant: ${e.block} landed at ${e.sha} but refs/tron/landed/${e.block} is ${refs.get(e.block) ?? 'missing'}`);
    }
  }
  if ((await git('rev-list', '--min-parents=2', 'main')) !== '')
    out.push('invariant: trunk has merge commits; its first-parent history must stay linear');
  return out;
}
