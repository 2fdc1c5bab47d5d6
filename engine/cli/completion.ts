/**
 * `tron completion bash|zsh`: shell completion scripts, rendered from the command table,
 * so a command or option added to the table completes with no second list to keep.
 * Beyond names and flags they complete what the arguments name: a block id from
 * `.tron/blocks/` and a run id from `.tron/runs/` of the `--repo` on the line (or the
 * current directory), directories for `DIR`, an option's choices. Pure.
 */
import type { ArgSpec, CommandSpec, Completion, OptionSpec } from './args.ts';

export type Shell = 'bash' | 'zsh';

/** The script for one shell, to `eval` in its rc file. */
export function completionScript(shell: Shell, commands: Record<string, CommandSpec>): string {
  return shell === 'bash' ? bashScript(commands) : zshScript(commands);
}

const GLOBAL_FLAGS = ['--help', '--version'];
const flagsOf = (c: CommandSpec) => [...Object.keys(c.options).map((o) => `--${o}`), '--help'];
const valued = (c: CommandSpec) => Object.entries(c.options).filter(([, o]) => o.type === 'string');

// ---------------------------------------------------------------- bash

/** The bash words that put the candidates for `what` into COMPREPLY. */
function bashCandidates(what: { complete?: Completion; choices?: readonly string[] }, commands: string[]): string {
  const reply = (generator: string) => `mapfile -t COMPREPLY < <(${generator})`;
  if (what.choices) return reply(`compgen -W "${what.choices.join(' ')}" -- "$cur"`);
  switch (what.complete) {
    case 'dir':
      return `compopt -o filenames 2>/dev/null; ${reply('compgen -d -- "$cur"')}`;
    case 'file':
      return `compopt -o filenames 2>/dev/null; ${reply('compgen -f -- "$cur"')}`;
    case 'block':
      return reply('compgen -W "$(_tron_ids blocks)" -- "$cur"');
    case 'run':
      return `compopt -o filenames 2>/dev/null; ${reply('compgen -W "$(_tron_ids runs)" -- "$cur"; compgen -d -- "$cur"')}`;
    case 'command':
      return reply(`compgen -W "${commands.join(' ')}" -- "$cur"`);
    case 'template':
      return reply('compgen -W "$(_tron_ids templates)" -- "$cur"');
    case undefined:
      return 'COMPREPLY=()';
  }
}

function bashCommand(name: string, c: CommandSpec, commands: string[]): string[] {
  const valueArms = valued(c).map(([o, spec]) => `        --${o}) ${bashCandidates(spec, commands)}; return ;;`);
  const positional = c.args.map((a, i) => {
    const last = i === c.args.length - 1 && a.variadic;
    return `        ${last ? '*' : String(i)}) ${bashCandidates(a, commands)} ;;`;
  });
  return [
    `    ${name})`,
    ...(valueArms.length > 0 ? ['      case $prev in', ...valueArms, '      esac'] : []),
    `      if [[ $cur == -* ]]; then mapfile -t COMPREPLY < <(compgen -W "${flagsOf(c).join(' ')}" -- "$cur"); return; fi`,
    ...(positional.length > 0
      ? [
          `      case $(_tron_argn "${valued(c)
            .map(([o]) => `--${o}`)
            .join(' ')}") in`,
          ...positional,
          '      esac',
        ]
      : []),
    '      ;;',
  ];
}

function bashScript(commands: Record<string, CommandSpec>): string {
  const names = Object.keys(commands);
  return [
    '# bash completion for tron, generated from its command table by `tron completion bash`.',
    '# Load it from ~/.bashrc:  eval "$(tron completion bash)"',
    '',
    '# The --repo on the command line, or the current directory.',
    '_tron_repo() {',
    '  local i',
    '  for ((i = 2; i < COMP_CWORD; i++)); do',
    '    if [[ ${COMP_WORDS[i]} == --repo ]]; then printf \'%s\\n\' "${COMP_WORDS[i + 1]/#\\~/$HOME}"; return; fi',
    '  done',
    "  printf '.\\n'",
    '}',
    '',
    '# Block ids, run ids or SIM template names, one a line.',
    '_tron_ids() {',
    '  local repo f',
    '  repo=$(_tron_repo)',
    '  case $1 in',
    '    blocks) for f in "$repo"/.tron/blocks/*.md; do [[ -e $f ]] && f=${f##*/} && printf \'%s\\n\' "${f%.md}"; done ;;',
    '    runs) for f in "$repo"/.tron/runs/*/; do [[ -e $f ]] && f=${f%/} && printf \'%s\\n\' "${f##*/}"; done ;;',
    '    templates) for f in evaluation/templates/*.toml; do [[ -e $f ]] && f=${f##*/} && printf \'%s\\n\' "${f%.toml}"; done ;;',
    '  esac',
    '}',
    '',
    '# Which positional argument the cursor is on (0 for the first); $1: the options that take a value.',
    '_tron_argn() {',
    '  local i n=0 w',
    '  for ((i = 2; i < COMP_CWORD; i++)); do',
    '    w=${COMP_WORDS[i]}',
    '    if [[ -n $w && " $1 " == *" $w "* ]]; then ((i++))',
    '    elif [[ $w != -* ]]; then ((n++)); fi',
    '  done',
    '  printf \'%s\\n\' "$n"',
    '}',
    '',
    '_tron() {',
    '  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}',
    '  COMPREPLY=()',
    '  if ((COMP_CWORD == 1)); then',
    `    if [[ $cur == -* ]]; then mapfile -t COMPREPLY < <(compgen -W "${GLOBAL_FLAGS.join(' ')}" -- "$cur")`,
    `    else mapfile -t COMPREPLY < <(compgen -W "${names.join(' ')}" -- "$cur"); fi`,
    '    return',
    '  fi',
    '  case ${COMP_WORDS[1]} in',
    ...Object.entries(commands).flatMap(([name, c]) => bashCommand(name, c, names)),
    '  esac',
    '}',
    '',
    'complete -F _tron tron',
  ].join('\n');
}

// ---------------------------------------------------------------- zsh

/** Text inside an `_arguments` description: no brackets or colons, quoted for single quotes. */
const zshText = (text: string) => text.replace(/[[\]]/g, '').replace(/:/g, '\\:').replace(/'/g, "'\\''");

function zshAction(what: { complete?: Completion; choices?: readonly string[] }): string {
  if (what.choices) return `(${what.choices.join(' ')})`;
  switch (what.complete) {
    case 'dir':
      return '_directories';
    case 'file':
      return '_files';
    case 'block':
      return '_tron_blocks';
    case 'run':
      return '_tron_runs';
    case 'command':
      return '_tron_commands';
    case 'template':
      return '_tron_templates';
    case undefined:
      return ' ';
  }
}

function zshOption(name: string, o: OptionSpec): string {
  const head = `--${name}[${zshText(o.description)}]`;
  return o.type === 'string' ? `'${head}:${zshText(o.choices ? 'value' : (o.value ?? 'VALUE'))}:${zshAction(o)}'` : `'${head}'`;
}

function zshArg(a: ArgSpec, i: number): string {
  const position = a.variadic ? '*' : String(i + 1);
  return `'${position}${a.optional ? '::' : ':'}${zshText(a.name)}:${zshAction(a)}'`;
}

function zshScript(commands: Record<string, CommandSpec>): string {
  const described = Object.entries(commands).map(([name, c]) => `    '${name}:${zshText(c.summary)}'`);
  const arms = Object.entries(commands).map(([name, c]) =>
    [
      `    ${name})`,
      '      _arguments -s \\',
      ...[...Object.entries(c.options).map(([o, spec]) => zshOption(o, spec)), "'(-h --help)'{-h,--help}'[print this help]'"].map(
        (s) => `        ${s} \\`,
      ),
      ...c.args.map((a, i) => `        ${zshArg(a, i)} \\`),
      '        && return 0',
      '      ;;',
    ].join('\n'),
  );
  return [
    '#compdef tron',
    '# zsh completion for tron, generated from its command table by `tron completion zsh`.',
    '# Load it from ~/.zshrc, after compinit:  eval "$(tron completion zsh)"',
    '# (or save it as _tron in a folder on $fpath).',
    '',
    '# The --repo on the command line, or the current directory.',
    '_tron_repo() {',
    '  local i',
    '  for ((i = 2; i < CURRENT; i++)); do',
    '    if [[ ${words[i]} == --repo ]]; then print -r -- ${~words[i+1]}; return; fi',
    '  done',
    '  print -r -- .',
    '}',
    '',
    '_tron_blocks() {',
    '  local -a ids',
    '  ids=($(_tron_repo)/.tron/blocks/*.md(N:t:r))',
    "  _wanted blocks expl 'block' compadd -a ids",
    '}',
    '',
    '_tron_runs() {',
    '  local -a ids',
    '  ids=($(_tron_repo)/.tron/runs/*(N/:t))',
    "  _alternative 'runs:run id:compadd -a ids' 'directories:run directory:_directories'",
    '}',
    '',
    '_tron_templates() {',
    '  local -a ids',
    '  ids=(evaluation/templates/*.toml(N:t:r))',
    "  _wanted templates expl 'template' compadd -a ids",
    '}',
    '',
    '_tron_commands() {',
    '  local -a commands',
    '  commands=(',
    ...described,
    '  )',
    "  _describe -t commands 'tron command' commands",
    '}',
    '',
    '_tron() {',
    '  if ((CURRENT == 2)); then',
    '    if [[ $PREFIX == -* ]]; then',
    "      _arguments '(-h --help)'{-h,--help}'[print the commands]' '(-v --version)'{-v,--version}'[print the version]'",
    '    else',
    '      _tron_commands',
    '    fi',
    '    return',
    '  fi',
    '  local cmd=${words[2]}',
    '  shift words',
    '  ((CURRENT--))',
    '  case $cmd in',
    ...arms,
    '  esac',
    '}',
    '',
    'if [[ $funcstack[1] == _tron ]]; then _tron "$@"; else compdef _tron tron; fi',
  ].join('\n');
}
