/**
 * Where tron's own files are. The engine reads files beside its code at run time — the
 * spine (engine/workflow.toml), prompts/, the SIM templates, package.json — and the code
 * runs either as TypeScript from the checkout (engine/…) or compiled (dist/engine/…).
 * Both resolve here, to the folder that holds tron's package.json, so no module counts
 * `..` from its own location.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function packageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`tron: no package.json above ${from}; the installation is incomplete`);
  }
}

/** The tron checkout, or the installed package's folder. */
export const TRON_ROOT = packageRoot(dirname(fileURLToPath(import.meta.url)));

/** A path inside the tron checkout or package: `tronPath('prompts')`. */
export const tronPath = (...parts: string[]): string => join(TRON_ROOT, ...parts);

/** tron's version, from its package.json (recorded in every run's manifest and run.started). */
export const TRON_VERSION: string = (JSON.parse(readFileSync(tronPath('package.json'), 'utf8')) as { version: string }).version;
