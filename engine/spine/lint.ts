/**
 * Lint rules for the phase spine and the escalation table. Each rule is a small named
 * function that returns every problem it finds, with a stable code, the file and
 * dotted key at fault, and the fix; `lintSpine` runs them all so a user sees every
 * mistake at once. The spine must agree with the glossary: a word may only be listed
 * where the glossary allows it, and a transition may only fire on a word or signal that
 * can actually arrive in its phase.
 */
import type { Problem } from '../core/errors.ts';
import { GLOSSARY, type WordSpec } from '../gateway/glossary.ts';
import { ROLES, type Role } from '../core/roles.ts';
import { ENGINE_PHASES, ESCALATION, HANDLERS, OUTCOMES, SIGNALS, type EscalationRow, type Phase, type Spine } from './spine.ts';
import { keyPath } from './parse.ts';

/** One rule: the spine and the name it is shown under (`engine/workflow.toml`) → problems. */
export type SpineRule = (spine: Spine, file: string) => Problem[];

/** Where ESCALATION and OUTCOMES live, for problems about them. */
export const ESCALATION_FILE = 'engine/spine/spine.ts';

const glossary: Record<string, WordSpec> = GLOSSARY;
const isWord = (w: string): boolean => Object.hasOwn(glossary, w);
const isSignal = (s: string): boolean => Object.hasOwn(SIGNALS, s);
const at = (file: string, ...parts: PropertyKey[]): string => `${file}: ${keyPath(parts)}`;
const names = (spine: Spine): Set<string> => new Set(spine.phases.map((p) => p.name));
const listed = (phase: Phase): [Role, string[]][] =>
  ROLES.flatMap((role) => (phase.words[role] ? [[role, phase.words[role]] as [Role, string[]]] : []));

function startKnown(spine: Spine, file: string): Problem[] {
  if (names(spine).has(spine.start)) return [];
  return [
    {
      code: 'TRON_SPINE_START_UNKNOWN',
      path: at(file, 'start'),
      message: `start phase "${spine.start}" is not defined; name one of the [phases.*] tables (${[...names(spine)].join(', ')})`,
    },
  ];
}

function enginePhasesDefined(spine: Spine, file: string): Problem[] {
  const known = names(spine);
  return ENGINE_PHASES.filter((name) => !known.has(name)).map((name) => ({
    code: 'TRON_SPINE_PHASE_MISSING',
    path: at(file, 'phases', name),
    message: `the engine acts on a phase "${name}" that this spine does not define; add a [phases.${name}] table`,
  }));
}

function transitionTargetsKnown(spine: Spine, file: string): Problem[] {
  const known = names(spine);
  return spine.phases.flatMap((phase) =>
    phase.transitions.flatMap((t, i) =>
      known.has(t.to)
        ? []
        : [
            {
              code: 'TRON_SPINE_TARGET_UNKNOWN',
              path: at(file, 'phases', phase.name, 'transitions', i, 'to'),
              message: `transition leads to "${t.to}", which is not a phase; name one of ${[...known].join(', ')}`,
            },
          ],
    ),
  );
}

function transitionTriggersLegal(spine: Spine, file: string): Problem[] {
  return spine.phases.flatMap((phase) =>
    phase.transitions.flatMap((t, i): Problem[] => {
      const path = at(file, 'phases', phase.name, 'transitions', i, 'on');
      if (isSignal(t.on)) return [];
      if (!isWord(t.on))
        return [
          {
            code: 'TRON_SPINE_TRIGGER_UNKNOWN',
            path,
            message: `"${t.on}" is neither a glossary word nor an engine signal; use a word from engine/gateway/glossary.ts or one of ${Object.keys(SIGNALS).join(', ')}`,
          },
        ];
      if (!glossary[t.on]!.phases.includes(phase.name))
        return [
          {
            code: 'TRON_SPINE_TRIGGER_PHASE',
            path,
            message: `the glossary does not allow ${t.on} in phase ${phase.name} (only in ${glossary[t.on]!.phases.join(', ')}); change the transition or the word's phases in engine/gateway/glossary.ts`,
          },
        ];
      if (!listed(phase).some(([, words]) => words.includes(t.on)))
        return [
          {
            code: 'TRON_SPINE_TRIGGER_UNLISTED',
            path,
            message: `no role lists ${t.on} under phases.${phase.name}.words, so this transition can never fire; add it to words.<role> or remove the transition`,
          },
        ];
      return [];
    }),
  );
}

function transitionTriggersUnique(spine: Spine, file: string): Problem[] {
  return spine.phases.flatMap((phase) =>
    phase.transitions.flatMap((t, i) => {
      const first = phase.transitions.findIndex((u) => u.on === t.on);
      return first === i
        ? []
        : [
            {
              code: 'TRON_SPINE_TRIGGER_DUPLICATE',
              path: at(file, 'phases', phase.name, 'transitions', i, 'on'),
              message: `transitions[${first}] already fires on ${t.on} in this phase; one outcome must lead to one place, so remove one`,
            },
          ];
    }),
  );
}

/** Pass edges, plus (when `escalation` is set) OUTCOMES' targets from every non-terminal phase. */
function edges(spine: Spine, escalation: boolean): Map<string, string[]> {
  const known = names(spine);
  const outcomeTargets = Object.values(OUTCOMES).map((o) => o.to as string);
  return new Map(
    spine.phases.map((p) => {
      const to = p.transitions.map((t) => t.to);
      if (escalation && !p.terminal) to.push(...outcomeTargets);
      return [p.name, to.filter((n) => known.has(n))];
    }),
  );
}

function closure(from: Iterable<string>, next: Map<string, string[]>): Set<string> {
  const seen = new Set(from);
  const queue = [...seen];
  for (let here = queue.shift(); here !== undefined; here = queue.shift()) {
    for (const n of next.get(here) ?? []) {
      if (seen.has(n)) continue;
      seen.add(n);
      queue.push(n);
    }
  }
  return seen;
}

/** Every phase must be reachable from start, through transitions or escalation outcomes. */
function phasesReachable(spine: Spine, file: string): Problem[] {
  if (!names(spine).has(spine.start)) return []; // startKnown reports it
  const reached = closure([spine.start], edges(spine, true));
  return spine.phases
    .filter((p) => !reached.has(p.name))
    .map((p) => ({
      code: 'TRON_SPINE_UNREACHABLE',
      path: at(file, 'phases', p.name),
      message: `no transition or escalation outcome leads to ${p.name} from start "${spine.start}"; add a transition to it or remove the phase`,
    }));
}

/** Following only pass transitions, every phase must be able to end in a terminal phase. */
function terminalReachable(spine: Spine, file: string): Problem[] {
  const reverse = new Map<string, string[]>();
  for (const [from, tos] of edges(spine, false)) for (const to of tos) reverse.set(to, [...(reverse.get(to) ?? []), from]);
  const ends = spine.phases.filter((p) => p.terminal).map((p) => p.name);
  const leads = closure(ends, reverse);
  return spine.phases
    .filter((p) => !leads.has(p.name))
    .map((p) => ({
      code: 'TRON_SPINE_NO_TERMINAL',
      path: at(file, 'phases', p.name),
      message: `no path of transitions leads from ${p.name} to a terminal phase (${ends.join(', ') || 'none is marked terminal = true'}); a block there could only leave by escalation — add a transition onward`,
    }));
}

function wordsKnown(spine: Spine, file: string): Problem[] {
  return spine.phases.flatMap((phase) =>
    listed(phase).flatMap(([role, words]) =>
      words.flatMap((w, i) =>
        isWord(w)
          ? []
          : [
              {
                code: 'TRON_SPINE_WORD_UNKNOWN',
                path: at(file, 'phases', phase.name, 'words', role, i),
                message: `"${w}" is not in the glossary; use one of ${Object.keys(glossary).join(', ')} or add the word to engine/gateway/glossary.ts`,
              },
            ],
      ),
    ),
  );
}

function wordsAllowedForRole(spine: Spine, file: string): Problem[] {
  return spine.phases.flatMap((phase) =>
    listed(phase).flatMap(([role, words]) =>
      words.flatMap((w, i) =>
        !isWord(w) || glossary[w]!.roles.includes(role)
          ? []
          : [
              {
                code: 'TRON_SPINE_WORD_ROLE',
                path: at(file, 'phases', phase.name, 'words', role, i),
                message: `the glossary does not let the ${role} send ${w} (only ${glossary[w]!.roles.join(', ')}); move it to an allowed role or remove it`,
              },
            ],
      ),
    ),
  );
}

function wordsAllowedInPhase(spine: Spine, file: string): Problem[] {
  return spine.phases.flatMap((phase) =>
    listed(phase).flatMap(([role, words]) =>
      words.flatMap((w, i) =>
        !isWord(w) || glossary[w]!.phases.includes(phase.name)
          ? []
          : [
              {
                code: 'TRON_SPINE_WORD_PHASE',
                path: at(file, 'phases', phase.name, 'words', role, i),
                message: `the glossary does not allow ${w} in phase ${phase.name} (only in ${glossary[w]!.phases.join(', ')}); remove it here or widen the word's phases in engine/gateway/glossary.ts`,
              },
            ],
      ),
    ),
  );
}

function terminalsInert(spine: Spine, file: string): Problem[] {
  return spine.phases
    .filter((p) => p.terminal)
    .flatMap((p) => {
      const extra = [
        p.transitions.length > 0 && 'transitions',
        listed(p).length > 0 && 'words',
        p.gate !== undefined && 'gate',
        p.attempts !== undefined && 'attempts',
        p.timeMs !== undefined && 'time',
      ].filter((k): k is string => k !== false);
      return extra.map((key) => ({
        code: 'TRON_SPINE_TERMINAL_ACTIVE',
        path: at(file, 'phases', p.name, key),
        message: `${p.name} is terminal (nothing happens there any more) yet has ${key}; remove ${key} or drop terminal = true`,
      }));
    });
}

function positiveBudgets(spine: Spine, file: string): Problem[] {
  const whole = (n: number, min: number) => Number.isInteger(n) && n >= min;
  const checks: [PropertyKey[], number, number, string][] = [
    [['budgets', 'architect'], spine.budgets.architect, 1, 'a whole number of at least 1'],
    [['liveness', 'probe_wait'], spine.liveness.probeWaitMs, 1, 'a duration longer than zero'],
    [['liveness', 'extension'], spine.liveness.extensionMs, 1, 'a duration longer than zero'],
    [['liveness', 'max_extensions'], spine.liveness.maxExtensions, 0, 'a whole number, 0 or more'],
    [['liveness', 'reissues'], spine.liveness.reissues, 0, 'a whole number, 0 or more'],
  ];
  for (const p of spine.phases) {
    if (p.attempts !== undefined) checks.push([['phases', p.name, 'attempts'], p.attempts, 1, 'a whole number of at least 1']);
    if (p.timeMs !== undefined) checks.push([['phases', p.name, 'time'], p.timeMs, 1, 'a duration longer than zero']);
  }
  return checks
    .filter(([, n, min]) => !whole(n, min))
    .map(([parts, n, , want]) => ({
      code: 'TRON_SPINE_BUDGET',
      path: at(file, ...parts),
      message: `${n} is not a usable budget; write ${want}`,
    }));
}

/** The budgets ESCALATION counts against (gate_budget, review_budget, merge_failed) must exist. */
function gatedPhasesHaveAttempts(spine: Spine, file: string): Problem[] {
  return spine.phases
    .filter((p) => (p.gate === 'truth' || p.gate === 'review' || p.gate === 'merge') && p.attempts === undefined)
    .map((p) => ({
      code: 'TRON_SPINE_ATTEMPTS_MISSING',
      path: at(file, 'phases', p.name, 'attempts'),
      message: `phase ${p.name} has a ${p.gate} gate but no attempt budget, so it could loop forever; add attempts = 3 (or another whole number)`,
    }));
}

function outcomeTargetsExist(spine: Spine, file: string): Problem[] {
  const known = names(spine);
  return Object.entries(OUTCOMES)
    .filter(([, o]) => !known.has(o.to))
    .map(([word, o]) => ({
      code: 'TRON_SPINE_OUTCOME_UNKNOWN',
      path: at(file, 'phases', o.to),
      message: `${word} (OUTCOMES in ${ESCALATION_FILE}) sends a block to "${o.to}", which the spine does not define; add [phases.${o.to}]`,
    }));
}

/** An escalation row whose handlers are not yet known to be valid (what lint checks). */
export type EscalationLike = Omit<EscalationRow, 'handlers'> & { handlers: readonly string[] };

/** The table of spine rules, by name. */
export const SPINE_RULES = {
  startKnown,
  enginePhasesDefined,
  transitionTargetsKnown,
  transitionTriggersLegal,
  transitionTriggersUnique,
  phasesReachable,
  terminalReachable,
  wordsKnown,
  wordsAllowedForRole,
  wordsAllowedInPhase,
  terminalsInert,
  positiveBudgets,
  gatedPhasesHaveAttempts,
  outcomeTargetsExist,
} as const satisfies Record<string, SpineRule>;

/** Every problem every spine rule finds, in rule order. */
export function lintSpine(spine: Spine, file: string): Problem[] {
  return Object.values(SPINE_RULES).flatMap((rule) => rule(spine, file));
}

/**
 * Lint the exception spine: every row names known handlers, at least one, none twice,
 * and ends with the operator — the one handler that always answers, so no trouble is
 * ever dropped.
 */
export function lintEscalation(table: Readonly<Record<string, EscalationLike>> = ESCALATION): Problem[] {
  return Object.entries(table).flatMap(([trouble, row]): Problem[] => {
    const path = (...parts: PropertyKey[]) => `${ESCALATION_FILE}: ${keyPath(['ESCALATION', trouble, ...parts])}`;
    const handlers: readonly string[] = row.handlers;
    if (handlers.length === 0)
      return [
        {
          code: 'TRON_SPINE_ESCALATION_EMPTY',
          path: path('handlers'),
          message: `trouble ${trouble} has no handlers and would be dropped; list handlers ending with "operator"`,
        },
      ];
    const problems: Problem[] = handlers.flatMap((h, i): Problem[] => {
      if (!Object.hasOwn(HANDLERS, h))
        return [
          {
            code: 'TRON_SPINE_ESCALATION_HANDLER',
            path: path('handlers', i),
            message: `"${h}" is not a handler; use one of ${Object.keys(HANDLERS).join(', ')}`,
          },
        ];
      if (handlers.indexOf(h) !== i)
        return [
          {
            code: 'TRON_SPINE_ESCALATION_DUPLICATE',
            path: path('handlers', i),
            message: `"${h}" is already listed at handlers[${handlers.indexOf(h)}]; each handler is tried once, so remove this one`,
          },
        ];
      return [];
    });
    if (handlers.at(-1) !== 'operator')
      problems.push({
        code: 'TRON_SPINE_ESCALATION_LAST',
        path: path('handlers', handlers.length - 1),
        message: `trouble ${trouble} ends with "${handlers.at(-1)}", which may fail to resolve it; end the row with "operator"`,
      });
    return problems;
  });
}
