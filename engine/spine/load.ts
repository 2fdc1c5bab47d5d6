/**
 * Loading the spine: read engine/workflow.toml (or another file), parse it
 * (engine/spine/parse.ts) and lint it with ESCALATION (engine/spine/lint.ts). Kept
 * apart from the tables in spine.ts because it reads the file system.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { InputError, type Problem } from '../core/errors.ts';
import { lintEscalation, lintSpine } from './lint.ts';
import { parseSpine } from './parse.ts';
import type { Spine } from './spine.ts';
import { TRON_ROOT, tronPath } from '../root.ts';

/** tron's own spine, in its checkout or package (not resolved against the cwd). */
export const SPINE_FILE = tronPath('engine', 'workflow.toml');

/** How a spine file is named in problems: relative to the tron checkout when inside it. */
export function spineDisplayName(file: string): string {
  const rel = path.relative(TRON_ROOT, path.resolve(file));
  return rel.startsWith('..') || path.isAbsolute(rel) ? file : rel.split(path.sep).join('/');
}

/**
 * Read, parse and lint a spine file together with ESCALATION, collecting every
 * problem; the spine is returned only when it parsed (it may still have lint problems).
 */
export function checkSpineFile(file: string = SPINE_FILE): { spine?: Spine; problems: Problem[] } {
  const shown = spineDisplayName(file);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? String(err);
    return { problems: [{ code: 'TRON_SPINE_READ', path: shown, message: `cannot read the spine (${why}); check the path` }] };
  }
  return checkSpineText(text, shown);
}

/** Parse and lint a spine's text (named `shown` in problems) together with ESCALATION, as checkSpineFile does. */
export function checkSpineText(text: string, shown: string): { spine?: Spine; problems: Problem[] } {
  const { spine, problems } = parseSpine(text, shown);
  if (!spine) return { problems: [...problems, ...lintEscalation()] };
  return { spine, problems: [...lintSpine(spine, shown), ...lintEscalation()] };
}

/**
 * The spine that drives the engine (by default the checkout's own), parsed and linted
 * with ESCALATION; throws one InputError carrying every problem when any exists.
 */
export function loadSpine(file: string = SPINE_FILE): Spine {
  const { spine, problems } = checkSpineFile(file);
  if (!spine || problems.length > 0) throw new InputError(problems);
  return spine;
}
