/**
 * The shape of a command in the CLI's table, and everything read from it: the usage line,
 * `--help`, and the argument check. One description feeds all three, so the usage line,
 * the help and the parser name the same arguments with the same metavariables (`DIR`,
 * `RUN`, `BLOCK`), and docs/CLI.md and the shell completions are rendered from it too.
 *
 * Parsing is Node's `util.parseArgs`, non-strict, with the checks done here on its tokens:
 * its own strict-mode messages (`… as in '-- "--wacth"'`) are written for programmers,
 * not for someone who mistyped a flag.
 */
import { parseArgs } from 'node:util';
import type { Problem } from '../core/errors.ts';
import { didYouMean } from '../core/suggest.ts';

/** What the shell can offer for a value: directories, files, a block id, a run id, a command name. */
export type Completion = 'dir' | 'file' | 'block' | 'run' | 'command' | 'template';

export interface OptionSpec {
  type: 'string' | 'boolean';
  description: string;
  /** A string option's metavariable, as usage and help show it: `--repo DIR`. */
  value?: string;
  /** The values a string option takes (the metavariable is then these, joined by `|`). */
  choices?: readonly string[];
  /** What the shell completes the value with. */
  complete?: Completion;
  short?: string;
  /** The shape a string option's value must have, and what the problem says when it has not (never the value: it may be secret). */
  form?: { pattern: RegExp; says: string };
}

export interface ArgSpec {
  /** The metavariable: `BLOCK`, `RUN`. */
  name: string;
  description: string;
  optional?: boolean;
  /** Takes any number (zero or more when optional). */
  variadic?: boolean;
  choices?: readonly string[];
  complete?: Completion;
}

export type Values = Record<string, string | boolean | undefined>;

export interface CommandSpec {
  summary: string;
  /** `user`: what a user of tron types. `contributor`: for work on tron itself, listed apart. */
  audience: 'user' | 'contributor';
  args: readonly ArgSpec[];
  options: Record<string, OptionSpec>;
  /** Example command lines for `--help` and docs/CLI.md. */
  examples?: readonly string[];
}

/** The metavariable of a string option's value. */
export const metavar = (o: OptionSpec): string => (o.choices ? o.choices.join('|') : (o.value ?? 'VALUE'));

const argForm = (a: ArgSpec): string => {
  const name = a.variadic ? `${a.name}...` : a.name;
  return a.optional ? `[${name}]` : name;
};

const optionForm = (name: string, o: OptionSpec): string => (o.type === 'string' ? `--${name} ${metavar(o)}` : `--${name}`);

/** `tron report [RUN] [--repo DIR] [--json]`: positional arguments, then options. */
export function usageLine(name: string, c: CommandSpec): string {
  return ['tron', name, ...c.args.map(argForm), ...Object.entries(c.options).map(([o, d]) => `[${optionForm(o, d)}]`)].join(' ');
}

/** The rows of `--help`: every argument and option with its description, aligned. */
export function helpRows(c: CommandSpec): { args: [string, string][]; options: [string, string][] } {
  return {
    args: c.args.map((a) => [a.variadic ? `${a.name}...` : a.name, a.description]),
    options: [
      ...Object.entries(c.options).map(([o, d]): [string, string] => [
        `${d.short ? `-${d.short}, ` : ''}${optionForm(o, d)}`,
        d.description,
      ]),
      ['-h, --help', 'print this help'],
    ],
  };
}

/** `tron COMMAND --help` and `tron help COMMAND`. */
export function commandHelp(name: string, c: CommandSpec): string {
  const rows = helpRows(c);
  const width = Math.max(...[...rows.args, ...rows.options].map(([left]) => left.length));
  const table = (list: [string, string][]) => list.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`);
  return [
    `Usage: ${usageLine(name, c)}`,
    '',
    c.summary,
    ...(rows.args.length > 0 ? ['', 'Arguments:', ...table(rows.args)] : []),
    '',
    'Options:',
    ...table(rows.options),
    ...(c.examples && c.examples.length > 0 ? ['', 'Examples:', ...c.examples.map((e) => `  ${e}`)] : []),
  ].join('\n');
}

export type Parsed = { ok: true; values: Values; positionals: string[]; help: boolean } | { ok: false; problem: Problem };

/**
 * Reads a command's arguments against its spec. Refuses, with one TRON_USAGE problem that
 * names the culprit and, where one is near, the flag that was meant: an unknown option, a
 * string option without its value, a value given to a switch, a missing or surplus
 * positional argument, a value outside an option's choices.
 */
export function parseCommand(name: string, c: CommandSpec, argv: readonly string[]): Parsed {
  const refuse = (message: string): Parsed => ({
    ok: false,
    problem: { code: 'TRON_USAGE', path: `tron ${name}`, message: `${message} (usage: ${usageLine(name, c)})` },
  });
  const options = { ...c.options, help: { type: 'boolean' as const, short: 'h', description: '' } };
  const { values, positionals, tokens } = parseArgs({
    args: [...argv],
    options: Object.fromEntries(Object.entries(options).map(([o, d]) => [o, { type: d.type, ...(d.short ? { short: d.short } : {}) }])),
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  if (values.help === true) return { ok: true, values: {}, positionals: [], help: true };
  const known = Object.keys(options).map((o) => `--${o}`);
  for (const t of tokens) {
    if (t.kind !== 'option') continue;
    const spec = (options as Record<string, OptionSpec>)[t.name];
    if (!spec) return refuse(`unknown option ${t.rawName}${didYouMean(t.rawName.startsWith('--') ? t.rawName : `--${t.name}`, known)}`);
    if (spec.type === 'boolean' && t.inlineValue) return refuse(`${t.rawName} takes no value`);
    if (spec.type === 'string') {
      const v = t.value;
      if (v === undefined || (!t.inlineValue && v.startsWith('-') && v !== '-'))
        return refuse(`${t.rawName} needs a value: ${optionForm(t.name, spec)}`);
      if (spec.choices && !spec.choices.includes(v))
        return refuse(`${t.rawName} ${v}: not one of ${spec.choices.join(', ')}${didYouMean(v, spec.choices)}`);
      if (spec.form && !spec.form.pattern.test(v)) return refuse(`${t.rawName} ${spec.form.says}`);
    }
  }
  const required = c.args.filter((a) => !a.optional).length;
  const max = c.args.some((a) => a.variadic) ? Number.POSITIVE_INFINITY : c.args.length;
  if (positionals.length > max) {
    const surplus = positionals.slice(max);
    const what = max === 0 ? 'takes no arguments' : `takes at most ${max} argument${max === 1 ? '' : 's'}`;
    return refuse(`${what}; surplus: ${surplus.map((s) => JSON.stringify(s)).join(' ')}`);
  }
  if (positionals.length < required) {
    const missing = c.args.slice(positionals.length).filter((a) => !a.optional);
    return refuse(`missing ${missing.map((a) => a.name).join(' and ')}`);
  }
  for (const [i, value] of positionals.entries()) {
    const a = c.args[Math.min(i, c.args.length - 1)];
    if (a?.choices && !a.choices.includes(value))
      return refuse(`${a.name} ${value}: not one of ${a.choices.join(', ')}${didYouMean(value, a.choices)}`);
  }
  const { help: _help, ...rest } = values;
  return { ok: true, values: rest, positionals, help: false };
}
