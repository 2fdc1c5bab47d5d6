/**
 * A SIM template: one scenario of the evaluation harness, in one TOML file under
 * `evaluation/templates/`. It describes a small starting repository (files and a test
 * command), the blocks, config extras, the scripted behaviour of every worker role per
 * turn (the `sim` adapter's script), one or more `tron start` invocations, and the
 * expected outcome. Loading validates all of it and names the file and key at fault.
 *
 *   title = "Happy path with dependencies"
 *   [config]                      # merged into .tron/config.toml; architect = true adds a sim architect
 *   max_parallel = 1
 *   [blocks.base]                 # block front matter (+ brief); defaults: title, one criterion
 *   criteria = ["base.js exports base"]
 *   [[script.base.builder]]       # the sim script: blocks.<id>.<role> of engine/workers/sim.ts
 *   write = { "base.js" = "…" }
 *   commit = "Add base"
 *   [[runs]]                      # optional: several starts (crash, then restart; answers between)
 *   crash_after = { type = "land.intent", blocks = [{ block = "base" }] }
 *   [remote]                      # optional: trunk lives on a bare repository served by git daemon ([remote] in config)
 *   down = true                   #   it starts down, and comes back once the engine waits for it (remote.retry)
 *   decline = "frozen"            #   a pre-receive hook declines every push with this message
 *   teammate = true               #   a second clone pushes to its trunk while the first stack is tested
 *   [forge]                       # optional (needs [remote]): the test GitHub server over that repository ([forge], [intake])
 *   land = "pr"                   #   "push" (default) or "pr"
 *   required_checks = ["ci/test"] #   trunk's branch protection
 *   ci = "test -s a.js"           #   hosted CI: run on every pushed tron/* head, reported as the first required check
 *   issues = [{ title = "…", body = "- [ ] …" }]   # opened in order (#1, #2, …), labelled tron; blocks gh-<n>-<slug>
 *   [[forge.faults]]              #   answers queued on the server: { status, match (a regexp of "METHOD /path"), retry_after }
 *   [[forge.people]]              #   a person acts once the log holds `after` (times): changes, approve or close
 *   [expect]                      # exit, phases, landed_before, events, absent, trunk_files
 *   exit = 0
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import TOML from '@iarna/toml';
import { z } from 'zod';
import { parseToml } from '../engine/project/config-problems.ts';
import { InputError, type Problem } from '../engine/core/errors.ts';
import { parseDuration } from '../engine/core/duration.ts';
import { SimScript } from '../engine/workers/sim.ts';
import { tronPath } from '../engine/root.ts';
import { issueBlockId } from '../engine/forge/intake.ts';

/** The templates shipped with tron. */
export const TEMPLATES_DIR = `${tronPath('evaluation', 'templates')}/`;

const duration = z.string().refine((s) => parseDuration(s) !== undefined, { message: 'a duration like "30s" or "2m"' });

/**
 * An event pattern: `type`, plus fields the event must hold. Objects match partially,
 * arrays as subsets (`facts = [{ name = "commits", ok = false }]`), and a string written
 * `"/…/"` is a regular expression. `times` asks for exactly that many matching events;
 * without it, at least one.
 */
const EventPattern = z.looseObject({ type: z.string().min(1), times: z.number().int().min(0).optional() });
export type EventPattern = z.infer<typeof EventPattern>;

const Answer = z.strictObject({ block: z.string(), reply: z.string().startsWith('>>') });

const Run = z.strictObject({
  /** Operator answers given with `tron answer` before this start. */
  answers: z.array(Answer).default([]),
  /** Run this start as its own process with TRON_CRASH_AFTER_EVENT=N: the engine dies right after event N. */
  crash_after_event: z.number().int().positive().optional(),
  /**
   * The same, with N found by the harness: the seq of the first event matching this
   * pattern in an uncrashed rehearsal of the scenario (so new events elsewhere in the
   * log do not move the crash off its moment).
   */
  crash_after: EventPattern.optional(),
  /** The type the crashed log must end with: proof the crash hit the intended moment. */
  last_event: z.string().optional(),
  exit: z.number().int().optional(),
  events: z.array(EventPattern).default([]),
  absent: z.array(EventPattern).default([]),
});
export type TemplateRun = z.infer<typeof Run>;

const BlockSpec = z.strictObject({
  title: z.string().optional(),
  criteria: z.array(z.string()).min(1).optional(),
  depends_on: z.array(z.string()).optional(),
  priority: z.number().int().optional(),
  brief: z.string().optional(),
});

const Expect = z.strictObject({
  /** Exit status of the last start. */
  exit: z.number().int(),
  /** The phase every named block ends in (after the last start). */
  phases: z.record(z.string(), z.string()).default({}),
  /** Pairs [a, b]: a landed before b. */
  landed_before: z.array(z.tuple([z.string(), z.string()])).default([]),
  /** Patterns that must match events of any start. */
  events: z.array(EventPattern).default([]),
  /** Patterns no event of any start may match. */
  absent: z.array(EventPattern).default([]),
  /** File contents on trunk at the end. */
  trunk_files: z.record(z.string(), z.string()).default({}),
});

/** `[remote]`: the scenario's trunk lives on a served bare repository (evaluation/harness.ts serves it). */
const RemoteSpec = z.strictObject({
  down: z.boolean().default(false),
  decline: z.string().min(1).optional(),
  teammate: z.boolean().default(false),
});

/** `[forge]`: the scenario's forge is the test GitHub server over the served remote (evaluation/harness.ts). */
const ForgeSpec = z.strictObject({
  land: z.enum(['push', 'pr']).default('push'),
  required_checks: z.array(z.string().min(1)).default([]),
  ci: z.string().min(1).optional(),
  require_human_approval: z.boolean().default(false),
  issues: z
    .array(z.strictObject({ title: z.string().min(1), body: z.string().default(''), labels: z.array(z.string()).default(['tron']) }))
    .min(1),
  faults: z
    .array(
      z.strictObject({
        status: z.number().int().min(300).max(599),
        match: z.string().optional(),
        retry_after: z.number().int().min(0).optional(),
        message: z.string().optional(),
      }),
    )
    .default([]),
  people: z
    .array(
      z.strictObject({
        after: z.string().min(1).describe('an event type in the run log'),
        times: z.number().int().min(1).default(1),
        do: z.enum(['changes', 'approve', 'close']),
        body: z.string().default(''),
        user: z.string().default('ada'),
      }),
    )
    .default([]),
});
export type ForgeSpec = z.infer<typeof ForgeSpec>;

const TemplateTable = z.strictObject({
  title: z.string().min(1),
  about: z.string().optional(),
  /** The whole scenario must finish within this (default 90s). */
  timeout: duration.default('90s'),
  repo: z
    .strictObject({ test: z.string().min(1).default('node test.js'), files: z.record(z.string(), z.string()).default({}) })
    .prefault({}),
  config: z.record(z.string(), z.unknown()).default({}),
  blocks: z.record(z.string(), BlockSpec),
  script: z.record(z.string(), z.unknown()).default({}),
  remote: RemoteSpec.optional(),
  forge: ForgeSpec.optional(),
  runs: z
    .array(Run)
    .min(1)
    .default([{ answers: [], events: [], absent: [] }]),
  expect: Expect,
});

export type TemplateSpec = z.infer<typeof TemplateTable>;

export interface Template extends TemplateSpec {
  /** The file name without `.toml`. */
  name: string;
  file: string;
  timeoutMs: number;
  /** The validated sim script, as `.tron/sim.toml` will hold it. */
  sim: SimScript;
}

/** Parses one template; every problem comes back at once, each naming the file and key. */
export function parseTemplate(text: string, file: string): { template?: Template; problems: Problem[] } {
  const toml = parseToml(text, file, 'TRON_SIM_TOML');
  if (toml.problem) return { problems: [toml.problem] };
  const parsed = TemplateTable.safeParse(toml.data);
  if (!parsed.success) return { problems: zodProblems(parsed.error, file, '') };
  const t = parsed.data;
  const sim = SimScript.safeParse({ blocks: t.script });
  if (!sim.success) return { problems: zodProblems(sim.error, file, '', (p) => (p[0] === 'blocks' ? ['script', ...p.slice(1)] : p)) };
  const problems = lintTemplate(t, file);
  if (problems.length > 0) return { problems };
  const name = basename(file).replace(/\.toml$/, '');
  return { template: { ...t, name, file, timeoutMs: parseDuration(t.timeout)!, sim: sim.data }, problems: [] };
}

/** Ids named anywhere in the template must be blocks of it. */
function lintTemplate(t: TemplateSpec, file: string): Problem[] {
  // Issues are blocks too: #1, #2, … in the order they are opened.
  const ids = new Set([...Object.keys(t.blocks), ...(t.forge?.issues ?? []).map((x, i) => issueBlockId(i + 1, x.title))]);
  const problems: Problem[] = [];
  const check = (id: string, where: string) => {
    if (!ids.has(id))
      problems.push({
        code: 'TRON_SIM_BLOCK',
        path: `${file}: ${where}`,
        message: `"${id}" is not a block of this template; add [blocks.${id}] or fix the id`,
      });
  };
  for (const id of Object.keys(t.script)) check(id, `script.${id}`);
  for (const id of Object.keys(t.expect.phases)) check(id, `expect.phases.${id}`);
  for (const [a, b] of t.expect.landed_before) for (const id of [a, b]) check(id, 'expect.landed_before');
  for (const [i, r] of t.runs.entries()) for (const a of r.answers) check(a.block, `runs[${i}].answers`);
  t.runs.forEach((r, i) => {
    if (r.crash_after && r.crash_after_event !== undefined) {
      problems.push({
        code: 'TRON_SIM_CRASH',
        path: `${file}: runs[${i}]`,
        message: 'give crash_after (a pattern) or crash_after_event (a seq), not both',
      });
    }
  });
  if (t.forge && !t.remote)
    problems.push({
      code: 'TRON_SIM_CONFIG',
      path: `${file}: forge`,
      message: "the forge's repository is the served remote: add a [remote] table",
    });
  if ('workers' in t.config) {
    problems.push({
      code: 'TRON_SIM_CONFIG',
      path: `${file}: config.workers`,
      message: 'workers are sim workers in every template; use architect = true to add a sim architect',
    });
  }
  return problems;
}

function zodProblems(error: z.ZodError, file: string, prefix: string, rename: (p: PropertyKey[]) => PropertyKey[] = (p) => p): Problem[] {
  return error.issues.map((issue) => {
    const at = [prefix, ...rename([...issue.path]).map(String)].filter(Boolean).join('.');
    const keys = issue.code === 'unrecognized_keys' ? `: ${issue.keys.join(', ')}` : '';
    return {
      code: 'TRON_SIM_TEMPLATE',
      path: `${file}${at ? `: ${at}` : ''}`,
      message: `${issue.message}${keys}; see evaluation/template.ts for the format`,
    };
  });
}

/** Reads and parses a template file; throws one InputError with every problem. */
export function loadTemplate(file: string): Template {
  const { template, problems } = parseTemplate(readFileSync(file, 'utf8'), file);
  if (!template) throw new InputError(problems);
  return template;
}

/** The template names (file stems) in a directory, sorted. */
export function templateNames(dir: string = TEMPLATES_DIR): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.toml'))
    .map((f) => f.slice(0, -'.toml'.length))
    .sort();
}

/**
 * The templates to run: all of `dir`, or those named (a name in `dir`, or a path to a
 * .toml file). An unknown name is an input error listing the names there are.
 */
export function selectTemplates(names: readonly string[], dir: string = TEMPLATES_DIR): Template[] {
  const known = templateNames(dir);
  if (names.length === 0) return known.map((n) => loadTemplate(join(dir, `${n}.toml`)));
  const problems: Problem[] = [];
  const files: string[] = [];
  for (const name of names) {
    if (name.endsWith('.toml')) files.push(name);
    else if (known.includes(name)) files.push(join(dir, `${name}.toml`));
    else problems.push({ code: 'TRON_SIM_UNKNOWN', path: name, message: `no such template; there are: ${known.join(', ')}` });
  }
  if (problems.length > 0) throw new InputError(problems);
  return files.map(loadTemplate);
}

/** The forge's address in a template's config until the harness's server listens. */
export const FORGE_URL_PLACEHOLDER = 'http://127.0.0.1:9/forge-not-started';

/** The `.tron/config.toml` a template runs with: sim workers, its test command, its extras. */
export function configToml(t: Template): string {
  const { architect, ...extra } = t.config as { architect?: unknown } & Record<string, unknown>;
  const sim = { adapter: 'sim', script: '.tron/sim.toml' };
  const base: Record<string, unknown> = {
    trunk: 'main',
    max_parallel: 2,
    test: t.repo.test,
    timeouts: { turn: '1m', test: '1m' },
    workers: { builder: sim, reviewer: sim, ...(architect === true ? { architect: sim } : {}) },
    // A served remote: short waits between tries; a teammate's push comes from the test run, which must reach the bare repository.
    ...(t.remote && { remote: { backoff: '100ms', retries: 50 } }),
    ...(t.remote?.teammate && { sandbox: { mode: 'off' } }),
    // A forge: the harness writes the test server's address over this one once it listens.
    ...(t.forge && {
      forge: {
        repo: 'acme/app',
        api_url: FORGE_URL_PLACEHOLDER,
        land: t.forge.land,
        require_human_approval: t.forge.require_human_approval,
        backoff: '50ms',
        retries: 20,
      },
      intake: { label: 'tron' },
    }),
  };
  return TOML.stringify(merge(base, extra) as TOML.JsonMap);
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const here = out[k];
    out[k] = isTable(here) && isTable(v) ? merge(here, v) : v;
  }
  return out;
}

const isTable = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
