/**
 * The run told as readable lines, from its events alone: what the console prints while
 * `tron start` runs (plain, or above the live board) and what `tron logs` prints for a
 * run. One formatter, so a run reads the same live and afterwards.
 *
 * Reasons are said inline and once: a failed gate names each failing fact with its
 * evidence — for the tests, the failing tests' own lines and the runner's summary
 * (engine/core/test-output.ts; the output's last lines when the runner is not one tron
 * reads) and the path of the whole log; a review's CHANGES carries the reviewer's notes; a page carries the exact
 * `tron answer` command. Output already shown for a block is not shown again (a page
 * after three red gates says "as above" instead of a fourth copy).
 *
 * Pure: no clock, no files. Times come from the events; the caller adds them.
 */
import { isCoded } from '../core/problems.ts';
import type { EventOf, TronEvent } from '../core/events.ts';
import { answerCommand } from '../gateway/answer-command.ts';
import { blockerWords, type Blocker } from '../core/blocked.ts';
import { failureExcerpt } from '../core/test-output.ts';
import { ParkedNow } from './parked-now.ts';
import { abandonedEarlierLine } from './abandoned-earlier.ts';

export { answerCommand };

/** Lines of a failing test's output shown inline; the whole output is in its log. */
export const TAIL_SHOWN = 15;
/** Lines of the failing tests' excerpt shown inline: their assertions, then the summary. */
export const FAILURES_SHOWN = 25;

/** Stack frames inside Node itself say nothing about the test that failed. */
const NODE_INTERNAL_FRAME = /^\s+at .*\(?node:internal\//;

/** What a failed run's shown output is: its failing tests, or its last lines. */
const told = (run: { failures?: string | undefined }) => (run.failures !== undefined ? 'the failing tests' : 'last lines');

const short = (sha: string | null | undefined): string => (sha ? sha.slice(0, 12) : '(none)');

/** `12:04:31`: the local wall-clock time of an event, as progress lines carry it. */
export function clockTime(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

/** Every line of `text` prefixed with the time of `ms`. */
export function stampLines(ms: number, text: string): string {
  const time = clockTime(ms);
  return text
    .split('\n')
    .map((l) => `${time} ${l}`)
    .join('\n');
}

function indent(text: string, by = '    '): string {
  return text
    .split('\n')
    .map((l) => `${by}${l}`)
    .join('\n');
}

function firstLine(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length < text.trimEnd().length ? `${line} …` : line;
}

export interface NarratorOptions {
  /** The repository (absolute), for the answer command. */
  repo: string;
  /** The run directory, for paths of test logs (they are recorded relative to it). */
  runDir?: string;
  /** A block's file (or its issue's URL), for the fix of a block an earlier run abandoned; default `.tron/blocks/<id>.md`. */
  blockFile?: (id: string) => string | undefined;
}

/** Reads events in log order and says what each means, in zero or more lines. */
export class Narrator {
  private run = '';
  private trunk = '';
  private trunkSha = '';
  private maxExtensions = 0;
  private registered = false;
  /** Per block: the test log of its latest observation, the notes of its latest CHANGES, a page on its way. */
  private readonly testLog = new Map<string, string>();
  private readonly notes = new Map<string, string>();
  private readonly paging = new Map<string, string>();
  private readonly paged = new Set<string>();
  /** Per block: the multi-line texts already shown, so none is shown twice. */
  private readonly shown = new Map<string, string[]>();
  private readonly reasons = new Map<string, string>();
  /** Each block's dependencies (from the register), and the blocks abandoned so far. */
  private readonly dependsOn = new Map<string, readonly string[]>();
  private readonly abandoned = new Set<string>();
  private readonly parkedNow = new ParkedNow();
  /** Blocks an earlier run landed or abandoned: the end line counts them apart from this run's. */
  private readonly carried = new Set<string>();
  /** The stack being landed: its blocks, and those of them whose landing was reported. */
  private landing: { stack: number; blocks: string[]; landed: number } | undefined;

  constructor(private readonly o: NarratorOptions) {}

  /** The lines one event adds to the story (often none). */
  lines(e: TronEvent): string[] {
    this.parkedNow.see(e);
    switch (e.type) {
      case 'run.started':
        this.run = e.run;
        this.trunk = e.trunk;
        this.trunkSha = e.trunk_sha;
        this.maxExtensions = e.liveness.max_extensions;
        return [];
      case 'register.loaded': {
        for (const b of e.blocks) this.dependsOn.set(b.id, b.depends_on);
        const first = !this.registered;
        this.registered = true;
        return first
          ? [`tron: run ${this.run} — ${e.blocks.length} block(s), trunk ${this.trunk} at ${short(this.trunkSha)}`]
          : [`tron: the register changed — ${e.blocks.length} block(s)`];
      }
      case 'block.recovered':
        if (e.phase === 'landed' || e.phase === 'abandoned') this.carried.add(e.block);
        if (e.phase === 'landed') return [];
        if (e.reason) this.reasons.set(e.block, e.reason);
        return [`${e.block}: resumes at ${e.phase} — ${firstLine(e.detail)}`];
      case 'worker.killed':
        return [`${e.block}: a worker process of run ${e.run} outlived it (pid ${e.pid}); killed`];
      case 'worktree.requested':
        return [`${e.block}: build (attempt ${e.attempt})`];
      case 'facts.observed':
        if (e.tests) this.testLog.set(e.block, e.tests.log);
        return [];
      case 'reply.accepted':
        if (e.word === 'CHANGES' && typeof e.payload.notes === 'string') this.notes.set(e.block, e.payload.notes);
        return [];
      case 'gate.failed':
        return this.gateFailed(e);
      case 'gate.passed':
        return [`${e.block}: gate passed at ${short(e.sha)}`];
      case 'block.phase': {
        const head = `${e.block}: ${e.from} → ${e.to} (${e.on})`;
        const notes = e.on === 'CHANGES' ? this.notes.get(e.block) : undefined;
        if (!notes) return [head];
        return notes.includes('\n') ? [`${head}, the reviewer's notes:\n${indent(notes)}`] : [`${head}: ${notes}`];
      }
      case 'land.intent':
        this.landing = { stack: e.stack, blocks: e.blocks.map((b) => b.block), landed: 0 };
        return [];
      case 'block.landed': {
        // The blocks of one stack land in one ref transaction: said once, when the last is reported.
        const stack = this.landing?.blocks.includes(e.block) ? this.landing : undefined;
        if (!stack || stack.blocks.length === 1)
          return [`${e.block}: landed — ${this.trunk || 'trunk'} ${short(e.from)} → ${short(e.sha)}`];
        stack.landed += 1;
        if (stack.landed < stack.blocks.length) return [];
        this.landing = undefined;
        return [
          `lane: stack ${stack.stack} landed — ${this.trunk || 'trunk'} ${short(e.from)} → ${short(e.top)} (${stack.blocks.join(', ')})`,
        ];
      }
      case 'land.refused':
        return [`${e.blocks.join(', ')}: landing refused — ${e.detail}`];
      case 'lane.stacked':
        return [
          `lane: stack ${e.stack} — ${e.blocks.map((b) => b.block).join(', ')} on ${this.trunk || 'trunk'} at ${short(e.trunk_sha)}${
            e.awaiting ? ` (tested while ${e.awaiting.join(', ')} ${e.awaiting.length === 1 ? 'is' : 'are'} judged)` : ''
          }`,
        ];
      case 'candidate.tested': {
        if (e.ok) return [];
        const run = e.tests ?? e.setup;
        const what = e.tests ? 'the tests' : 'setup';
        const head = `lane: stack ${e.stack} is red at ${short(e.sha)} (${e.blocks.join(', ')}): ${what} failed`;
        return run
          ? [`${head}; ${told(run)}:\n${this.tail(`stack ${e.stack}`, run.failures ?? run.tail)}\n    log: ${this.path(run.log)}`]
          : [head];
      }
      case 'lane.closed':
        return [`lane: stack ${e.stack} closed — ${e.detail}`];
      case 'tests.refused':
        return [`${e.block}: a test run on an agent at ${short(e.sha)} was not believed — ${e.reason}; tron runs it itself`];
      case 'trunk.tested':
        if (e.ok) return [];
        return [
          `${e.block}: trunk is red at ${short(e.sha)} after landing; ${told(e.tests)}:\n${this.tail(e.block, e.tests.failures ?? e.tests.tail)}\n    log: ${this.path(e.tests.log)}`,
        ];
      case 'escalation.raised':
        if (e.handler === 'operator') {
          this.paging.set(e.block, e.trouble);
          return [];
        }
        // The probe and the re-issue say so themselves (worker.overran, turn.reissued).
        if (e.handler === 'probe' || e.handler === 'reissue') return [];
        return [
          `${e.block}: ${e.trouble} → ${e.handler}${e.trouble === 'gate_budget' ? '' : ` — ${firstLine(this.once(e.block, e.detail))}`}`,
        ];
      case 'block.parked': {
        this.reasons.set(e.block, e.reason);
        if (this.paging.has(e.block)) return [`${e.block}: parked, for the operator`];
        // Parked because a dependency was abandoned: it waits on that, not on the operator.
        const gone = (this.dependsOn.get(e.block) ?? []).find((d) => this.abandoned.has(d));
        if (gone) return [`${e.block}: blocked — ${this.once(e.block, e.reason)}`];
        return [`${e.block}: parked — ${this.once(e.block, e.reason)}`];
      }
      case 'page.sent': {
        const trouble = this.paging.get(e.block);
        this.paging.delete(e.block);
        this.paged.add(e.block);
        return [
          `PAGE ${e.block}${trouble ? ` (${trouble})` : ''}: ${this.once(e.block, e.reason)}\n  answer: ${answerCommand(this.o.repo, e.block)}`,
        ];
      }
      case 'operator.answered':
        return [`${e.block}: the operator answered >>${e.word}`];
      case 'block.wrapped':
        return e.leftover ? [`${e.block}: landed; what its worktree left could not be removed (\`tron clean\` will): ${e.leftover}`] : [];
      case 'block.abandoned':
        this.abandoned.add(e.block);
        this.reasons.set(e.block, e.reason);
        return [`${e.block}: abandoned — ${this.once(e.block, e.reason)}`];
      case 'worker.overran':
        return [`${e.block}: turn ${e.turn} overran (${Math.round(e.elapsed_ms / 1000)}s); probing for signs of life`];
      case 'worker.extended':
        return [`${e.block}: the worker shows life; extension ${e.count} of ${this.maxExtensions}`];
      case 'turn.reissued':
        return [`${e.block}: turn ${e.turn} re-issued — ${e.reason}`];
      case 'worker.retry':
        return [
          `${e.block}: the model API failed${e.status ? ` (${e.status})` : ''}; retry ${e.attempt} in ${Math.round(e.delay_ms / 1000)}s — ${firstLine(e.error)}`,
        ];
      case 'worker.unavailable':
        return [`tron: the ${e.role} worker is unavailable (${e.cause}); no ${e.role} turn starts until the operator answers ${e.block}`];
      case 'turn.held':
        return [`${e.block}: ${e.kind} turn held — the ${e.role} worker is unavailable`];
      case 'reply.refused':
        // A failed turn says why, in the worker's own last words (the message ends with them).
        return e.kind === 'turn_failed' ? [`${e.block}: ${e.session} turn ${e.turn} — ${e.message}`] : [];
      case 'budget.exceeded': {
        const spent = `$${e.spent_usd.toFixed(4)} (${e.spent_tokens.toLocaleString('en-US')} tokens)`;
        return e.scope === 'run'
          ? [`tron: the run spent ${spent}, past its budget ${e.limit}; stopping every turn`]
          : [`${e.block}: spent ${spent}, past its budget ${e.limit}; its turn is stopped`];
      }
      case 'run.stopping':
        return [`tron: ${e.signal} — no new work; stopping the running turns (a second signal stops at once)`];
      case 'run.failed':
        // A coded detail names what failed and where already (engine/runtime/failure.ts).
        return [isCoded(e.detail) ? `tron: ${e.detail}` : `tron: an effect failed after ${e.after}: ${e.detail}`];
      case 'run.finished':
        return this.finished(e);
      default:
        return [];
    }
  }

  private gateFailed(e: EventOf<'gate.failed'>): string[] {
    const failed = e.facts.filter((f) => !f.ok);
    const out = [`${e.block}: gate failed — ${failed.map((f) => f.name).join(', ')}`];
    for (const f of failed) {
      const [head, ...rest] = f.evidence.split('\n');
      const log = f.name === 'tests' ? this.testLog.get(e.block) : undefined;
      if (rest.length === 0) {
        out.push(`  ${f.name}: ${head}${log && !head?.includes(log) ? ` (log: ${this.path(log)})` : ''}`);
        continue;
      }
      const body = this.tail(e.block, rest.join('\n'));
      out.push(`  ${f.name}: ${head}\n${body}${log ? `\n    log: ${this.path(log)}` : ''}`);
    }
    return [out.join('\n')];
  }

  private finished(e: EventOf<'run.finished'>): string[] {
    const out: string[] = [];
    // A run stopped early counts its unfinished blocks with the parked: those wait for no answer.
    const { parked, unfinished } = this.parkedNow.split(e);
    if (unfinished.length > 0)
      out.push(
        `tron: ${unfinished.join(', ')} ${unfinished.length === 1 ? 'is' : 'are'} unfinished — the next \`tron start\` goes on with ${unfinished.length === 1 ? 'it' : 'them'}`,
      );
    for (const id of parked) {
      const reason = this.reasons.get(id);
      const why = this.paged.has(id) || !reason ? '' : `: ${this.once(id, reason)}`;
      out.push(`tron: ${id} is parked${why}\n  answer: ${answerCommand(this.o.repo, id)}`);
    }
    // Blocked blocks are the operator's only through their dependency: no answer is offered for them.
    const blocked = e.blocked ?? [];
    for (const { block, by } of blocked) {
      const is: Blocker['is'] = e.abandoned.includes(by) ? 'abandoned' : blocked.some((b) => b.block === by) ? 'blocked' : 'parked';
      out.push(`tron: ${block} is blocked: it ${blockerWords({ dependency: by, is })}`);
    }
    for (const id of e.abandoned.filter((id) => !this.carried.has(id))) {
      const reason = this.reasons.get(id);
      out.push(`tron: ${id} was abandoned${reason ? `: ${firstLine(reason)}` : ''}`);
    }
    // Abandoned by an earlier run: they alone keep this run at exit 3 if all else landed; said once, with the way out.
    const earlier = abandonedEarlierLine(
      e.abandoned
        .filter((id) => this.carried.has(id))
        .map((block) => ({ block, reason: this.reasons.get(block), file: this.o.blockFile?.(block) })),
    );
    if (earlier) out.push(earlier);
    const landed = e.landed.filter((id) => !this.carried.has(id));
    const abandoned = e.abandoned.filter((id) => !this.carried.has(id));
    const before = [
      e.landed.length > landed.length ? `${e.landed.length - landed.length} landed` : '',
      e.abandoned.length > abandoned.length ? `${e.abandoned.length - abandoned.length} abandoned` : '',
    ].filter(Boolean);
    const carried = before.length > 0 ? `; before this run: ${before.join(', ')}` : '';
    const counts = `${landed.length} landed, ${unfinished.length > 0 ? `${unfinished.length} unfinished, ` : ''}${parked.length} parked, ${blocked.length > 0 ? `${blocked.length} blocked, ` : ''}${abandoned.length} abandoned${carried}`;
    const where = this.o.runDir ? `; run directory: ${this.o.runDir}` : '';
    out.push(`tron: run ${this.run} finished (exit ${e.exit}) — ${counts}${e.detail ? ` (${e.detail})` : ''}${where}`);
    return out;
  }

  /**
   * A failing output, indented: the failing tests and the summary where the runner is
   * known, else the last lines; "as above" when this block already showed it.
   */
  private tail(block: string, text: string): string {
    const whole = text.trimEnd();
    const seen = this.shown.get(block) ?? [];
    if (seen.includes(whole)) return '    (the same output as above)';
    // The whole text is remembered, so a reason quoting it is shortened whole.
    seen.push(whole);
    seen.sort((a, b) => b.length - a.length);
    this.shown.set(block, seen);
    const failures = failureExcerpt(whole, FAILURES_SHOWN);
    if (failures !== undefined) return indent(failures);
    const lines = whole.split('\n').filter((l) => !NODE_INTERNAL_FRAME.test(l));
    const kept = lines.slice(-TAIL_SHOWN).join('\n');
    return indent(lines.length > TAIL_SHOWN ? `…\n${kept}` : kept);
  }

  /** A reason, with any output this block already showed replaced by "as above". */
  private once(block: string, text: string): string {
    let out = text;
    for (const seen of this.shown.get(block) ?? []) {
      const at = out.indexOf(seen);
      if (at >= 0) out = `${out.slice(0, at)}(the output shown above)${out.slice(at + seen.length)}`;
    }
    if (!out.includes('\n')) return out;
    const [head, ...rest] = out.split('\n');
    return `${head}\n${indent(rest.join('\n'))}`;
  }

  private path(log: string): string {
    return this.o.runDir ? `${this.o.runDir}/${log}` : log;
  }
}
