/**
 * What a reader of the workflow diagram is told about each element: one `Details`
 * record per phase, gateway, handler and flow. engine/render/bpmn.ts writes it into
 * `bpmn:documentation` as plain text; the viewer page embeds the same records as JSON
 * for its details panel. One description, two renderings, no drift between them.
 */
import { formatDuration } from '../core/duration.ts';
import { ROLES } from '../core/roles.ts';
import { ESCALATION, HANDLERS, OUTCOMES, type Handler, type Phase, type Spine, type Trouble } from '../spine/spine.ts';

export interface Details {
  title: string;
  /** What sort of element: "phase", "terminal phase", "handler", "transition", … */
  kind: string;
  description: string;
  /** Label/value pairs in reading order (gate, attempts, time budget, budgets). */
  facts: [string, string][];
  /** Legal words by role, in ROLES order; only roles that have words here. */
  words: { role: string; words: string[] }[];
  transitions: { on: string; to: string; when: string }[];
}

function details(title: string, kind: string, description: string, extra: Partial<Details> = {}): Details {
  return { title, kind, description, facts: [], words: [], transitions: [], ...extra };
}

/** Gate, budgets, legal words and transitions of one phase. */
export function phaseDetails(phase: Phase): Details {
  const facts: [string, string][] = [];
  if (phase.gate) facts.push(['Gate', phase.gate]);
  if (phase.attempts !== undefined) facts.push(['Attempts', String(phase.attempts)]);
  if (phase.timeMs !== undefined) facts.push(['Time budget', formatDuration(phase.timeMs)]);
  const words = ROLES.flatMap((role) => {
    const list = phase.words[role];
    return list && list.length > 0 ? [{ role, words: [...list] }] : [];
  });
  const transitions = phase.transitions.map((t) => ({ on: t.on, to: t.to, when: t.when }));
  return details(phase.title, phase.terminal ? 'terminal phase' : 'phase', phase.description, { facts, words, transitions });
}

/** The gateway after a phase splits on that phase's transitions. */
export function gatewayDetails(phase: Phase): Details {
  const transitions = phase.transitions.map((t) => ({ on: t.on, to: t.to, when: t.when }));
  const what = phase.gate ? `the ${phase.gate} gate` : 'the answer';
  return details(`${phase.title}: outcome`, 'gateway', `Where ${what} sends the block next.`, { transitions });
}

export function transitionDetails(from: Phase, on: string, to: string, when: string): Details {
  return details(`${on} → ${to}`, 'transition', when, { facts: [['From', from.name]] });
}

/** One row of the exception spine per trouble: "restate → architect → operator". */
export function troubleFacts(troubles: readonly Trouble[] = Object.keys(ESCALATION) as Trouble[]): [string, string][] {
  return troubles.map((t) => [t, `${ESCALATION[t].handlers.join(' → ')}: ${ESCALATION[t].description}`]);
}

export function troubleGatewayDetails(): Details {
  return details(
    'Trouble',
    'exception spine',
    'Every stuck or uninterpretable signal is one of these troubles, handled by its row in order: never guessed at, never silently dropped.',
    { facts: troubleFacts() },
  );
}

export function boundaryDetails(phase: Phase): Details {
  return details(
    `Trouble in ${phase.title}`,
    'escalation',
    `A trouble raised while the block is in ${phase.name} leaves the pass spine for the exception spine.`,
    { facts: troubleFacts() },
  );
}

export function handlerDetails(handler: Handler, spine: Spine): Details {
  const facts: [string, string][] = [];
  const handles = (Object.keys(ESCALATION) as Trouble[]).filter((t) => (ESCALATION[t].handlers as readonly Handler[]).includes(handler));
  facts.push(['Handles', handles.join(', ')]);
  if (handler === 'architect') facts.push(['Budget', `${spine.budgets.architect} consultations per block`]);
  if (handler === 'probe') {
    facts.push(['Probe wait', formatDuration(spine.liveness.probeWaitMs)]);
    facts.push(['Extension', `${formatDuration(spine.liveness.extensionMs)} per sign of life, at most ${spine.liveness.maxExtensions}`]);
  }
  if (handler === 'reissue') facts.push(['Re-issues', String(spine.liveness.reissues)]);
  const title = handler[0]!.toUpperCase() + handler.slice(1);
  return details(title, 'handler', HANDLERS[handler], { facts });
}

export function choiceDetails(): Details {
  const transitions = (Object.keys(OUTCOMES) as (keyof typeof OUTCOMES)[]).map((word) => ({
    on: word,
    to: OUTCOMES[word].to,
    when: OUTCOMES[word].effect,
  }));
  return details("Architect's choice", 'gateway', 'The architect answers with exactly one typed word.', { transitions });
}

/** Plain text for `bpmn:documentation`: the same facts the viewer panel shows. */
export function detailsText(d: Details): string {
  const lines = [d.description];
  for (const [label, value] of d.facts) lines.push(`${label}: ${value}`);
  if (d.words.length > 0) {
    lines.push('Legal words:');
    for (const w of d.words) lines.push(`- ${w.role}: ${w.words.join(', ')}`);
  }
  if (d.transitions.length > 0) {
    lines.push('Transitions:');
    for (const t of d.transitions) lines.push(`- ${t.on} → ${t.to}: ${t.when}`);
  }
  return lines.join('\n');
}
