import { describe, expect, it } from 'vitest';
import type { Problem } from '../core/errors.ts';
import { ESCALATION, type Spine } from './spine.ts';
import { checkSpineFile, SPINE_FILE } from './load.ts';
import { parseSpine } from './parse.ts';
import { lintEscalation, lintSpine, SPINE_RULES } from './lint.ts';

const F = 'engine/workflow.toml';

/** A small spine that passes every rule; each case below breaks it in one place. */
const BASE = `
version = 1
start = "build"

[budgets]
architect = 2

[liveness]
probe_wait = "30s"
extension = "10m"
max_extensions = 3
reissues = 1

[phases.build]
title = "Build"
description = "Build it."
gate = "truth"
attempts = 3
time = "60m"
words.builder = ["DONE", "CONFIRMED", "BLOCKED"]
words.architect = ["RETRY", "ABANDON", "PAGE"]
transitions = [
  { on = "CONFIRMED", to = "review", when = "every fact held" },
  { on = "gate.failed", to = "build", when = "a fact failed" },
]

[phases.review]
title = "Review"
description = "Read it."
gate = "review"
attempts = 2
time = "30m"
words.reviewer = ["APPROVE", "CHANGES"]
transitions = [
  { on = "APPROVE", to = "merge", when = "accepted" },
  { on = "CHANGES", to = "build", when = "changes asked" },
]

[phases.merge]
title = "Merge"
description = "Land it."
gate = "merge"
attempts = 2
words.builder = ["MERGED", "BLOCKED"]
transitions = [
  { on = "landed", to = "wrap", when = "it landed" },
]

[phases.wrap]
title = "Wrap"
description = "Clean up."
gate = "wrap"
transitions = [
  { on = "wrapped", to = "landed", when = "cleaned up" },
]

[phases.landed]
title = "Landed"
description = "Done."
terminal = true

[phases.parked]
title = "Parked"
description = "Waiting for the operator."
words.operator = ["RETRY", "ABANDON"]
transitions = [
  { on = "RETRY", to = "build", when = "guidance given" },
  { on = "ABANDON", to = "abandoned", when = "given up" },
]

[phases.abandoned]
title = "Abandoned"
description = "Given up."
terminal = true
`;

/** BASE with each `[from, to]` replaced once; a replacement that finds nothing fails the test. */
function edit(...edits: [string, string][]): string {
  return edits.reduce((text, [from, to]) => {
    if (!text.includes(from)) throw new Error(`test edit: "${from}" is not in the spine text`);
    return text.replace(from, to);
  }, BASE);
}

function spineOf(text: string): Spine {
  const { spine, problems } = parseSpine(text, F);
  if (!spine) throw new Error(`test spine does not parse: ${JSON.stringify(problems)}`);
  return spine;
}

const pick = (problems: Problem[]) => problems.map(({ code, path }) => ({ code, path }));

type RuleName = keyof typeof SPINE_RULES;
const CASES: { rule: RuleName; title: string; text: string; code: string; path: string }[] = [
  {
    rule: 'enginePhasesDefined',
    title: 'a spine without a phase the engine acts on by name',
    text: edit(['[phases.wrap]', '[phases.wrapup]'], ['to = "wrap"', 'to = "wrapup"']),
    code: 'TRON_SPINE_PHASE_MISSING',
    path: `${F}: phases.wrap`,
  },
  {
    rule: 'startKnown',
    title: 'a start phase that is not defined',
    text: edit(['start = "build"', 'start = "biuld"']),
    code: 'TRON_SPINE_START_UNKNOWN',
    path: `${F}: start`,
  },
  {
    rule: 'transitionTargetsKnown',
    title: 'a transition to a phase that does not exist',
    text: edit(['{ on = "CHANGES", to = "build"', '{ on = "CHANGES", to = "biuld"']),
    code: 'TRON_SPINE_TARGET_UNKNOWN',
    path: `${F}: phases.review.transitions[1].to`,
  },
  {
    rule: 'transitionTriggersLegal',
    title: 'a transition on something that is neither a glossary word nor a signal',
    text: edit(['{ on = "APPROVE"', '{ on = "SHIPIT"']),
    code: 'TRON_SPINE_TRIGGER_UNKNOWN',
    path: `${F}: phases.review.transitions[0].on`,
  },
  {
    rule: 'transitionTriggersLegal',
    title: 'a transition on a word the glossary does not allow in that phase',
    text: edit(['{ on = "APPROVE"', '{ on = "DONE"']),
    code: 'TRON_SPINE_TRIGGER_PHASE',
    path: `${F}: phases.review.transitions[0].on`,
  },
  {
    rule: 'transitionTriggersLegal',
    title: 'a transition on a word no role lists in that phase',
    text: edit(['words.builder = ["DONE", "CONFIRMED", "BLOCKED"]', 'words.builder = ["DONE", "BLOCKED"]']),
    code: 'TRON_SPINE_TRIGGER_UNLISTED',
    path: `${F}: phases.build.transitions[0].on`,
  },
  {
    rule: 'transitionTriggersUnique',
    title: 'two transitions of one phase on the same outcome',
    text: edit([
      '{ on = "gate.failed", to = "build", when = "a fact failed" },',
      '{ on = "gate.failed", to = "build", when = "a fact failed" },\n  { on = "gate.failed", to = "review", when = "again" },',
    ]),
    code: 'TRON_SPINE_TRIGGER_DUPLICATE',
    path: `${F}: phases.build.transitions[2].on`,
  },
  {
    rule: 'phasesReachable',
    title: 'a phase nothing leads to',
    text: `${BASE}\n[phases.limbo]\ntitle = "Limbo"\ndescription = "Orphaned."\ntransitions = [{ on = "wrapped", to = "landed", when = "never" }]\n`,
    code: 'TRON_SPINE_UNREACHABLE',
    path: `${F}: phases.limbo`,
  },
  {
    rule: 'terminalReachable',
    title: 'a phase from which no transition leads to a terminal phase',
    text: edit(
      [
        '{ on = "gate.failed", to = "build", when = "a fact failed" },',
        '{ on = "gate.failed", to = "build", when = "a fact failed" },\n  { on = "wrapped", to = "limbo", when = "sideways" },',
      ],
      ['[phases.landed]', '[phases.limbo]\ntitle = "Limbo"\ndescription = "Stuck."\n\n[phases.landed]'],
    ),
    code: 'TRON_SPINE_NO_TERMINAL',
    path: `${F}: phases.limbo`,
  },
  {
    rule: 'wordsKnown',
    title: 'a listed word missing from the glossary',
    text: edit(['words.builder = ["DONE", "CONFIRMED", "BLOCKED"]', 'words.builder = ["DONE", "SHIP", "CONFIRMED", "BLOCKED"]']),
    code: 'TRON_SPINE_WORD_UNKNOWN',
    path: `${F}: phases.build.words.builder[1]`,
  },
  {
    rule: 'wordsAllowedForRole',
    title: 'a word listed for a role the glossary does not allow',
    text: edit(['words.reviewer = ["APPROVE", "CHANGES"]', 'words.reviewer = ["APPROVE", "CHANGES"]\nwords.operator = ["PAGE"]']),
    code: 'TRON_SPINE_WORD_ROLE',
    path: `${F}: phases.review.words.operator[0]`,
  },
  {
    rule: 'wordsAllowedInPhase',
    title: 'a word listed in a phase the glossary does not allow',
    text: edit(['words.builder = ["DONE", "CONFIRMED", "BLOCKED"]', 'words.builder = ["DONE", "CONFIRMED", "BLOCKED", "MERGED"]']),
    code: 'TRON_SPINE_WORD_PHASE',
    path: `${F}: phases.build.words.builder[3]`,
  },
  {
    rule: 'terminalsInert',
    title: 'a terminal phase with transitions',
    text: edit([
      'description = "Done."\nterminal = true',
      'description = "Done."\nterminal = true\ntransitions = [{ on = "wrapped", to = "build", when = "again" }]',
    ]),
    code: 'TRON_SPINE_TERMINAL_ACTIVE',
    path: `${F}: phases.landed.transitions`,
  },
  {
    rule: 'terminalsInert',
    title: 'a terminal phase with words',
    text: edit(['description = "Given up."\nterminal = true', 'description = "Given up."\nterminal = true\nwords.operator = ["RETRY"]']),
    code: 'TRON_SPINE_TERMINAL_ACTIVE',
    path: `${F}: phases.abandoned.words`,
  },
  {
    rule: 'positiveBudgets',
    title: 'an attempt budget of zero',
    text: edit(['attempts = 3', 'attempts = 0']),
    code: 'TRON_SPINE_BUDGET',
    path: `${F}: phases.build.attempts`,
  },
  {
    rule: 'positiveBudgets',
    title: 'a fractional architect budget',
    text: edit(['architect = 2', 'architect = 1.5']),
    code: 'TRON_SPINE_BUDGET',
    path: `${F}: budgets.architect`,
  },
  {
    rule: 'positiveBudgets',
    title: 'a phase time of zero',
    text: edit(['time = "30m"', 'time = "0s"']),
    code: 'TRON_SPINE_BUDGET',
    path: `${F}: phases.review.time`,
  },
  {
    rule: 'positiveBudgets',
    title: 'a probe wait of zero',
    text: edit(['probe_wait = "30s"', 'probe_wait = "0ms"']),
    code: 'TRON_SPINE_BUDGET',
    path: `${F}: liveness.probe_wait`,
  },
  {
    rule: 'positiveBudgets',
    title: 'a negative number of extensions',
    text: edit(['max_extensions = 3', 'max_extensions = -1']),
    code: 'TRON_SPINE_BUDGET',
    path: `${F}: liveness.max_extensions`,
  },
  {
    rule: 'gatedPhasesHaveAttempts',
    title: 'a gated phase without an attempt budget',
    text: edit(['attempts = 2\n', '']),
    code: 'TRON_SPINE_ATTEMPTS_MISSING',
    path: `${F}: phases.review.attempts`,
  },
  {
    rule: 'outcomeTargetsExist',
    title: 'an escalation outcome leading to a phase the spine lacks',
    text: edit(['[phases.parked]\ntitle = "Parked"', '[phases.waiting]\ntitle = "Parked"']),
    code: 'TRON_SPINE_OUTCOME_UNKNOWN',
    path: `${F}: phases.parked`,
  },
];

describe('spine lint rules', () => {
  it('find nothing wrong with the base spine the cases start from', () => {
    const spine = spineOf(BASE);
    for (const rule of Object.values(SPINE_RULES)) expect(rule(spine, F)).toEqual([]);
  });

  it.each(CASES)('$rule reports $title', ({ rule, text, code, path }) => {
    const spine = spineOf(text);
    expect(pick(SPINE_RULES[rule](spine, F))).toContainEqual({ code, path });
    expect(pick(lintSpine(spine, F))).toContainEqual({ code, path });
  });

  it('has a broken-spine case for every rule in the table', () => {
    expect(new Set(CASES.map((c) => c.rule))).toEqual(new Set(Object.keys(SPINE_RULES)));
  });

  it('allows zero reissues and zero extensions', () => {
    const spine = spineOf(edit(['max_extensions = 3', 'max_extensions = 0'], ['reissues = 1', 'reissues = 0']));
    expect(SPINE_RULES.positiveBudgets(spine, F)).toEqual([]);
  });

  it('counts escalation outcomes as a way in, so parked and abandoned are reachable without a transition', () => {
    const spine = spineOf(edit(['{ on = "ABANDON", to = "abandoned", when = "given up" },', '']));
    expect(SPINE_RULES.phasesReachable(spine, F)).toEqual([]);
  });

  it('does not count escalation outcomes as a way out: a phase must reach a terminal by its own transitions', () => {
    const spine = spineOf(
      edit(['{ on = "APPROVE", to = "merge", when = "accepted" },', '{ on = "APPROVE", to = "build", when = "accepted" },']),
    );
    expect(pick(SPINE_RULES.terminalReachable(spine, F))).toEqual([
      { code: 'TRON_SPINE_NO_TERMINAL', path: `${F}: phases.build` },
      { code: 'TRON_SPINE_NO_TERMINAL', path: `${F}: phases.review` },
    ]);
  });

  it('reports every problem of a spine at once, each with a message saying what to do', () => {
    const spine = spineOf(
      edit(
        ['start = "build"', 'start = "biuld"'],
        ['attempts = 3', 'attempts = 0'],
        ['"DONE", "CONFIRMED"', '"DONE", "SHIP", "CONFIRMED"'],
      ),
    );
    const problems = lintSpine(spine, F);
    expect(pick(problems)).toEqual(
      expect.arrayContaining([
        { code: 'TRON_SPINE_START_UNKNOWN', path: `${F}: start` },
        { code: 'TRON_SPINE_BUDGET', path: `${F}: phases.build.attempts` },
        { code: 'TRON_SPINE_WORD_UNKNOWN', path: `${F}: phases.build.words.builder[1]` },
      ]),
    );
    for (const p of problems) expect(p.message).toMatch(/;/);
  });

  it('finds the real engine/workflow.toml clean', () => {
    expect(checkSpineFile(SPINE_FILE).problems).toEqual([]);
  });
});

describe('escalation lint', () => {
  it('finds the real ESCALATION table clean', () => {
    expect(lintEscalation(ESCALATION)).toEqual([]);
    expect(lintEscalation()).toEqual([]);
  });

  it('reports a handler that is not in HANDLERS', () => {
    const problems = lintEscalation({ stuck: { description: 'stuck', handlers: ['architect', 'pray', 'operator'] } });
    expect(pick(problems)).toEqual([
      { code: 'TRON_SPINE_ESCALATION_HANDLER', path: 'engine/spine/spine.ts: ESCALATION.stuck.handlers[1]' },
    ]);
  });

  it('reports a row with no handlers', () => {
    const problems = lintEscalation({ stuck: { description: 'stuck', handlers: [] } });
    expect(pick(problems)).toEqual([{ code: 'TRON_SPINE_ESCALATION_EMPTY', path: 'engine/spine/spine.ts: ESCALATION.stuck.handlers' }]);
  });

  it('reports a handler listed twice and a row that does not end with the operator', () => {
    const problems = lintEscalation({ stuck: { description: 'stuck', handlers: ['architect', 'probe', 'architect'] } });
    expect(pick(problems)).toEqual([
      { code: 'TRON_SPINE_ESCALATION_DUPLICATE', path: 'engine/spine/spine.ts: ESCALATION.stuck.handlers[2]' },
      { code: 'TRON_SPINE_ESCALATION_LAST', path: 'engine/spine/spine.ts: ESCALATION.stuck.handlers[2]' },
    ]);
  });
});
