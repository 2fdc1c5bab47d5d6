import { describe, expect, it } from 'vitest';
import { COMMANDS } from './table.ts';
import { commandHelp, metavar, parseCommand, usageLine, type CommandSpec } from './args.ts';

const spec: CommandSpec = {
  summary: 'a test command',
  audience: 'user',
  args: [
    { name: 'BLOCK', description: 'a block' },
    { name: 'RUN', optional: true, description: 'a run' },
  ],
  options: {
    repo: { type: 'string', value: 'DIR', description: 'the repository' },
    watch: { type: 'boolean', description: 'stay up' },
    worker: { type: 'string', choices: ['openai', 'sim'], description: 'a preset' },
  },
};

const refusal = (argv: string[]) => {
  const parsed = parseCommand('t', spec, argv);
  if (parsed.ok) throw new Error(`accepted ${argv.join(' ')}`);
  expect(parsed.problem.code).toBe('TRON_USAGE');
  return parsed.problem.message;
};

describe('the usage line and help of a command', () => {
  it('are made from one description: positional arguments, then options, with their metavariables', () => {
    expect(usageLine('t', spec)).toBe('tron t BLOCK [RUN] [--repo DIR] [--watch] [--worker openai|sim]');
    const help = commandHelp('t', spec);
    expect(help).toContain('Usage: tron t BLOCK [RUN] [--repo DIR] [--watch] [--worker openai|sim]');
    expect(help).toMatch(/^ {2}BLOCK +a block$/m);
    expect(help).toMatch(/^ {2}--repo DIR +the repository$/m);
    expect(help).toMatch(/^ {2}-h, --help +print this help$/m);
  });

  it('name every string option of the real table with the same metavariable in usage and help, never VALUE', () => {
    for (const [name, c] of Object.entries(COMMANDS)) {
      const usage = usageLine(name, c);
      const help = commandHelp(name, c);
      for (const [option, o] of Object.entries(c.options)) {
        if (o.type !== 'string') continue;
        expect(metavar(o)).not.toBe('VALUE');
        expect(usage).toContain(`--${option} ${metavar(o)}`);
        expect(help).toMatch(new RegExp(`^ {2}--${option} ${metavar(o).replace(/\|/g, '\\|')} `, 'm'));
      }
      for (const a of c.args) expect(usage).toContain(a.name);
    }
  });
});

describe('parseCommand', () => {
  it('reads positional arguments and options', () => {
    expect(parseCommand('t', spec, ['a', '--repo', '../x', '--watch'])).toEqual({
      ok: true,
      values: { repo: '../x', watch: true },
      positionals: ['a'],
      help: false,
    });
    expect(parseCommand('t', spec, ['a', 'r1', '--worker=sim'])).toMatchObject({
      ok: true,
      positionals: ['a', 'r1'],
      values: { worker: 'sim' },
    });
  });

  it('answers --help and -h before checking anything else', () => {
    expect(parseCommand('t', spec, ['--help'])).toMatchObject({ ok: true, help: true });
    expect(parseCommand('t', spec, ['-h', '--nonsense', 'x', 'y', 'z'])).toMatchObject({ ok: true, help: true });
  });

  it('refuses an unknown option, naming the one meant, in its own words rather than Node’s', () => {
    const message = refusal(['a', '--wacth']);
    expect(message).toMatch(/^unknown option --wacth; did you mean --watch\? \(usage: tron t /);
    expect(message).not.toContain("as in '--");
    expect(refusal(['a', '-x'])).toMatch(/^unknown option -x/);
  });

  it('refuses a string option without its value, and a value given to a switch', () => {
    expect(refusal(['a', '--repo'])).toMatch(/^--repo needs a value: --repo DIR/);
    expect(refusal(['a', '--repo', '--watch'])).toMatch(/^--repo needs a value/);
    expect(refusal(['a', '--watch=yes'])).toMatch(/^--watch takes no value/);
  });

  it('refuses a value outside the choices, suggesting the near one', () => {
    expect(refusal(['a', '--worker', 'sin'])).toMatch(/^--worker sin: not one of openai, sim; did you mean sim\?/);
  });

  it('refuses surplus and missing positional arguments', () => {
    expect(refusal(['a', 'b', 'c'])).toMatch(/^takes at most 2 arguments; surplus: "c"/);
    expect(refusal([])).toMatch(/^missing BLOCK \(usage/);
    const none = { ...spec, args: [] };
    const parsed = parseCommand('demo', none, ['extra']);
    expect(parsed.ok ? '' : parsed.problem.message).toMatch(/^takes no arguments; surplus: "extra"/);
  });
});
