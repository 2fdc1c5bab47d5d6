/**
 * Run statistics, from the events alone: `report.md` at the end of every run and
 * `tron report RUN_DIR`. Nothing here reads git, the clock or the workers.
 */
import type { TronEvent } from './events.ts';

export interface BlockStats {
  id: string;
  phase: string;
  attempts: number;
  gateFailures: Record<string, number>;
  reviewRounds: number;
  escalations: string[];
  tokens: Record<string, number>;
  /** ms spent in each phase. */
  phaseMs: Record<string, number>;
}

export interface RunStats {
  run: string;
  wallMs: number;
  landed: number;
  parked: number;
  abandoned: number;
  exit: number | undefined;
  blocks: BlockStats[];
  events: number;
}

/** Folds a run's events into its statistics. */
export function runStats(events: readonly TronEvent[]): RunStats {
  const blocks = new Map<string, BlockStats & { enteredAt: number }>();
  let run = '';
  let exit: number | undefined;
  const first = events[0]?.ts ?? 0;
  const last = events.at(-1)?.ts ?? first;
  const get = (id: string, ts: number) => {
    let b = blocks.get(id);
    if (!b) {
      b = { id, phase: 'pending', attempts: 0, gateFailures: {}, reviewRounds: 0, escalations: [], tokens: {}, phaseMs: {}, enteredAt: ts };
      blocks.set(id, b);
    }
    return b;
  };
  const enter = (b: BlockStats & { enteredAt: number }, phase: string, ts: number) => {
    b.phaseMs[b.phase] = (b.phaseMs[b.phase] ?? 0) + (ts - b.enteredAt);
    b.phase = phase;
    b.enteredAt = ts;
  };
  for (const e of events) {
    switch (e.type) {
      case 'run.started':
        run = e.run;
        break;
      case 'register.loaded':
        for (const info of e.blocks) get(info.id, e.ts);
        break;
      case 'worktree.requested': {
        const b = get(e.block, e.ts);
        b.attempts = e.attempt;
        if (b.phase === 'pending') enter(b, 'build', e.ts);
        break;
      }
      case 'block.phase': {
        const b = get(e.block, e.ts);
        if (e.from === 'review' && e.to === 'build') b.reviewRounds += 1;
        enter(b, e.to, e.ts);
        break;
      }
      case 'block.recovered':
        enter(get(e.block, e.ts), e.phase, e.ts);
        break;
      case 'gate.failed': {
        const b = get(e.block, e.ts);
        for (const f of e.facts.filter((x) => !x.ok)) b.gateFailures[f.name] = (b.gateFailures[f.name] ?? 0) + 1;
        break;
      }
      case 'escalation.raised':
        get(e.block, e.ts).escalations.push(`${e.trouble}→${e.handler}`);
        break;
      case 'block.parked':
        enter(get(e.block, e.ts), 'parked', e.ts);
        break;
      case 'block.abandoned':
        enter(get(e.block, e.ts), 'abandoned', e.ts);
        break;
      case 'worker.usage': {
        const b = get(e.block, e.ts);
        b.tokens[e.role] = (b.tokens[e.role] ?? 0) + e.total_tokens;
        break;
      }
      case 'run.finished':
        exit = e.exit;
        break;
      default:
        break;
    }
  }
  const list = [...blocks.values()].map(({ enteredAt, ...b }) => {
    b.phaseMs[b.phase] = (b.phaseMs[b.phase] ?? 0) + (last - enteredAt);
    return b;
  });
  const count = (p: string) => list.filter((b) => b.phase === p).length;
  return {
    run,
    wallMs: last - first,
    landed: count('landed'),
    parked: list.filter((b) => !['landed', 'abandoned'].includes(b.phase)).length,
    abandoned: count('abandoned'),
    exit,
    blocks: list,
    events: events.length,
  };
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/** report.md: the statistics as Markdown. */
export function renderReport(events: readonly TronEvent[]): string {
  const s = runStats(events);
  const lines = [
    `# tron run ${s.run}`,
    '',
    `${s.landed} landed, ${s.parked} parked, ${s.abandoned} abandoned; ${s.events} events; wall time ${secs(s.wallMs)}; exit ${s.exit ?? '(running)'}.`,
    '',
    '| block | phase | attempts | gate failures | review rounds | escalations | tokens | time by phase |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const b of s.blocks) {
    const failures = Object.entries(b.gateFailures).map(([k, v]) => `${k}×${v}`).join(', ') || '—';
    const tokens = Object.entries(b.tokens).map(([k, v]) => `${k} ${v}`).join(', ') || '—';
    const time = Object.entries(b.phaseMs).filter(([k]) => k !== 'landed' && k !== 'abandoned').map(([k, v]) => `${k} ${secs(v)}`).join(', ');
    lines.push(`| ${b.id} | ${b.phase} | ${b.attempts} | ${failures} | ${b.reviewRounds} | ${b.escalations.join(', ') || '—'} | ${tokens} | ${time} |`);
  }
  return `${lines.join('\n')}\n`;
}
