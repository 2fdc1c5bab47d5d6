/**
 * The live board's content: a frame of text from the run's events (folded with the
 * engine's own `apply`, so the board shows exactly the state the engine decides from)
 * and the latest line each block's worker printed. One row per block at work — phase,
 * attempt, time in phase, what it is doing now — above them the counts, the run's spend
 * and the merge lane. Pure: the caller feeds events and output, and asks for a frame at
 * a time and a width; engine/render/reporter.ts draws it.
 */
import { blockedBy } from '../core/blocked.ts';
import { EVENT_SCHEMAS, type TronEvent } from '../core/events.ts';
import { apply, initialState, type BlockState, type EngineState } from '../core/state.ts';

/** Control sequences (colours, cursor moves) a worker may print: never drawn on the board. */
const ESCAPES = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]|[\u0000-\u0008\u000b-\u001f\u007f]/g;

/** The last non-blank line of some output, without control sequences; undefined when there is none. */
export function lastLine(text: string): string | undefined {
  const lines = text.replace(/\r(?!\n)/g, '\n').split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.replace(ESCAPES, '').trim();
    if (line) return line;
  }
  return undefined;
}

/** `0:42`, `12:05`, `1:02:09`. */
export function clockDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

function tokens(n: number): string {
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(1)}M`;
  if (n >= 10_000) return `${Math.round(n / 1000)}k`;
  if (n >= 1000) return `${(n / 1000).toFixed(1)}k`;
  return String(n);
}

/** What a block waits for, in words. */
function waitingFor(b: BlockState): string {
  const w = b.waiting;
  switch (w.on) {
    case 'turn':
      return `${w.turn.role}, ${w.turn.kind} turn ${w.turn.turn}`;
    case 'facts':
      return w.purpose === 'gate' ? 'the engine checks its work and runs the tests' : 'the engine re-tests it on trunk';
    case 'worktree':
      return 'preparing its worktree';
    case 'worker':
      return `held: the ${w.held.role} worker is unavailable`;
    case 'lane':
      return 'queued for the merge lane';
    case 'stack':
      return 'in the merge lane';
    case 'wrap':
      return 'wrapping up';
    case 'operator':
      return 'waiting for the operator';
    case 'reissue':
      return 're-issuing its turn';
    case 'slot':
      return 'waiting for a slot';
    case 'nothing':
      return '';
  }
}

const HIDDEN = new Set(['pending', 'landed', 'abandoned', 'parked']);

/** Cuts a line to `width` characters (code points), marking the cut. */
function clip(line: string, width: number): string {
  const chars = [...line];
  return chars.length <= width ? line : `${chars.slice(0, Math.max(0, width - 1)).join('')}…`;
}

export class Board {
  private state: EngineState = initialState();
  private startedAt: number | undefined;
  private finished = false;
  private tokens = 0;
  private costUsd: number | undefined;
  /** Per block: the latest line its worker printed in the current turn. */
  private readonly activity = new Map<string, string>();

  /** Folds one appended event. */
  event(e: TronEvent): void {
    const raw = e as unknown as Record<string, unknown>;
    // A type this build does not know (a newer log) changes nothing the board folds.
    if (Object.hasOwn(EVENT_SCHEMAS, e.type)) this.state = apply(this.state, e);
    // Usage arrives as worker.usage (older runs) or usage.recorded (with a cost); read either.
    const n = (k: string) => (typeof raw[k] === 'number' ? (raw[k] as number) : 0);
    switch (raw.type) {
      case 'run.started':
        this.startedAt ??= e.ts;
        break;
      case 'run.finished':
        this.finished = true;
        break;
      case 'block.dispatched':
        this.activity.delete((e as { block: string }).block);
        break;
      case 'worker.usage':
        this.tokens += n('total_tokens');
        break;
      case 'usage.recorded':
        this.tokens += n('input_tokens') + n('cached_tokens') + n('output_tokens');
        if (typeof raw.cost_usd === 'number') this.costUsd = (this.costUsd ?? 0) + raw.cost_usd;
        break;
    }
  }

  /** A chunk of live output (or a progress note) of a block's worker. */
  output(block: string, text: string): void {
    const line = lastLine(text);
    if (line) this.activity.set(block, line);
  }

  /** The frame at `now`, each line at most `width` characters. */
  render(now: number, width: number): string {
    const s = this.state;
    const blocks = s.order.map((id) => s.blocks.get(id)!);
    // Blocked (waiting on a dependency that did not land) is counted apart from parked and pending.
    const blocked = new Set(blocks.filter((b) => blockedBy(s, b.id)).map((b) => b.id));
    const count = (phase: string) => blocks.filter((b) => b.phase === phase && !blocked.has(b.id)).length;
    const active = blocks.filter((b) => !HIDDEN.has(b.phase));
    const head = [
      `tron ${s.run ?? ''}`.trim(),
      this.startedAt !== undefined ? clockDuration(now - this.startedAt) : undefined,
      `${active.length} at work`,
      `${count('landed')} landed`,
      `${count('parked')} parked`,
      `${count('pending')} pending`,
      blocked.size > 0 ? `${blocked.size} blocked` : undefined,
      count('abandoned') > 0 ? `${count('abandoned')} abandoned` : undefined,
      this.tokens > 0 || this.costUsd !== undefined
        ? `spent ${tokens(this.tokens)} tokens${this.costUsd !== undefined ? `, $${this.costUsd.toFixed(2)}` : ''}`
        : undefined,
      this.finished ? 'finished' : undefined,
    ]
      .filter(Boolean)
      .join(' · ');
    const lines = [head, this.lane()];
    const idWidth = Math.max(5, ...active.map((b) => b.id.length));
    const phaseWidth = Math.max(5, ...active.map((b) => b.phase.length));
    for (const b of active) {
      const doing = waitingFor(b);
      const said = b.waiting.on === 'turn' ? this.activity.get(b.id) : undefined;
      lines.push(
        `  ${b.id.padEnd(idWidth)}  ${b.phase.padEnd(phaseWidth)}  #${b.attempt}  ${clockDuration(now - b.since).padStart(5)}  ${doing}${said ? ` › ${said}` : ''}`,
      );
    }
    return lines.map((l) => clip(l, Math.max(20, width - 1))).join('\n');
  }

  private lane(): string {
    const s = this.state;
    if (s.trunkHalt) return `merge lane: halted — trunk was moved to ${s.trunkHalt.sha.slice(0, 12)} by someone else`;
    const queued = s.lane.queue.length > 0 ? `; queued: ${s.lane.queue.join(', ')}` : '';
    const stack = s.lane.stack;
    if (!stack) return `merge lane: free${queued}`;
    const blocks = stack.entries.length > 0 ? stack.entries.map((e) => e.block) : stack.asked;
    // [merge] speculate: blocks of the stack still being challenged or reviewed, and what the lane holds for them.
    const awaited = (stack.awaiting ?? []).map((a) => a.block).filter((id) => blocks.includes(id));
    const held = stack.green === stack.entries.length ? 'green' : stack.red ? 'red' : 'rebased';
    const at = stack.step;
    const doing =
      at.at === 'landing' || at.at === 'forge'
        ? 'landing'
        : at.at === 'testing'
          ? `testing ${at.sha.slice(0, 12)}`
          : at.at === 'rebasing' || awaited.length === 0
            ? 'rebasing'
            : held;
    const verdicts = awaited.length > 0 ? `, awaiting the verdict on ${awaited.join(', ')}` : '';
    return `merge lane: stack ${stack.id} (${blocks.join(', ')}) — ${doing}${verdicts}${queued}`;
  }
}
