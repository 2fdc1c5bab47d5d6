/**
 * Programs some tests need beyond Node and git: Chromium for the workflow page, zsh and
 * tmux for the shell completion on a real terminal. Decided at run time from this
 * machine, never by a static skip in the code: where one is missing, those tests skip
 * with one printed line naming the program and its install command; with `CI=true`
 * nothing may skip — the tests run and fail, naming what is missing (.ci/run installs all).
 */
import { existsSync } from 'node:fs';
import { findProgram } from '../workers/preflight.ts';

/** A program the tests may need, as found (or not) on this machine. */
export interface Needed {
  /** What the tests call it: "zsh", "Chromium". */
  name: string;
  /** Where it is, when it is here. */
  path?: string;
  /** How to install it: "apt-get install -y zsh". */
  install: string;
}

/** Whether this run is CI's (`CI=true`), where nothing may skip. */
export function inCi(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  return /^(1|true)$/i.test(env.CI ?? '');
}

/**
 * Looks `program` up: at `at` when given (an explicit path, e.g. from CHROMIUM_PATH), else
 * on PATH under any of its names.
 */
export function needProgram(name: string, install: string, opts: { names?: string[]; at?: string } = {}): Needed {
  if (opts.at !== undefined) return existsSync(opts.at) ? { name, path: opts.at, install } : { name, install };
  for (const program of opts.names ?? [name]) {
    const path = findProgram(program, process.env.PATH, '/');
    if (path) return { name, path, install };
  }
  return { name, install };
}

/** "zsh is not installed here: apt-get install -y zsh" for each missing one, or an empty list. */
export function missing(...needs: Needed[]): string[] {
  return needs.filter((n) => n.path === undefined).map((n) => `${n.name} is not installed here: ${n.install}`);
}

/**
 * True when the tests that need `needs` should skip here: something is missing and this is
 * not CI. Prints one line per missing program saying so. Use as `describe.skipIf(skipWithout(…))`,
 * and call `requireAll(…)` first thing in those tests, so that under CI they fail by name.
 */
export function skipWithout(what: string, ...needs: Needed[]): boolean {
  const lacking = missing(...needs);
  if (lacking.length === 0 || inCi()) return false;
  for (const line of lacking) console.warn(`skipped: ${what} — ${line}`);
  return true;
}

/** Throws, naming every missing program and its install command; nothing when all are here. */
export function requireAll(...needs: Needed[]): void {
  const lacking = missing(...needs);
  if (lacking.length > 0) throw new Error(`${lacking.join('; ')}${inCi() ? ' (CI=true: nothing may skip)' : ''}`);
}
