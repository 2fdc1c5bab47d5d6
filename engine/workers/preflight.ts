/**
 * Before anything runs, the configured workers must be startable: an openai worker's key
 * variable set, a command worker's program found, and a CLI tron knows (Claude Code,
 * Codex) able to authenticate — its key variable passed on, its own login on disk, or
 * what its own configuration names, such as a Codex model provider's key variable
 * (engine/workers/login.ts). A missing one is a configuration mistake — exit 2 with the
 * setting to fix — not three failed turns and a page.
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import type { Problem } from '../core/errors.ts';
import type { Config } from '../project/config.ts';
import { WORKER_ROLES } from '../core/roles.ts';
import { loginProblem } from './login.ts';

/** How to install the agent CLIs the presets name, for the message that says one is missing. */
export const INSTALL_HINTS: Readonly<Record<string, string>> = {
  claude: 'npm install -g @anthropic-ai/claude-code',
  codex: 'npm install -g @openai/codex',
};

/** "cannot find X on PATH; …", with the install command when tron knows the program. */
export function notFoundMessage(program: string): string {
  const hint = INSTALL_HINTS[program];
  const install = hint ? `install it (${hint}) and log in` : 'install it';
  return `cannot find "${program}" on PATH; ${install}, or put the full path of the agent's program in command`;
}

function executable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Where `program` would be found on `path`, as a shell would look it up. */
export function findProgram(program: string, path: string | undefined, cwd: string): string | undefined {
  if (program.includes('/')) {
    const file = isAbsolute(program) ? program : join(cwd, program);
    return executable(file) ? file : undefined;
  }
  for (const dir of (path ?? '').split(delimiter)) {
    if (dir && executable(join(dir, program))) return join(dir, program);
  }
  return undefined;
}

export function preflightWorkers(
  config: Config,
  env: Record<string, string | undefined>,
  repo: string,
  platform: NodeJS.Platform = process.platform,
): Problem[] {
  const problems: Problem[] = [];
  for (const role of WORKER_ROLES) {
    const w = config.workers[role];
    if (!w) continue;
    const path = `.tron/config.toml: workers.${role}`;
    if (w.adapter === 'openai' && !env[w.api_key_env]) {
      problems.push({
        code: 'TRON_WORKER_KEY_UNSET',
        path: `${path}.api_key_env`,
        message: `$${w.api_key_env} is not set; export it (the API key of ${w.base_url ?? 'the OpenAI API'}), or name the variable that holds the key in api_key_env`,
      });
    }
    if (w.adapter === 'command' && !w.command[0]!.includes('{') && !findProgram(w.command[0]!, env.PATH, repo)) {
      problems.push({
        code: 'TRON_WORKER_NOT_FOUND',
        path: `${path}.command`,
        message: notFoundMessage(w.command[0]!),
      });
    } else if (w.adapter === 'command') {
      const login = loginProblem(w, env, platform, repo);
      if (login) problems.push({ code: 'TRON_WORKER_AUTH', path: `${path}.env`, message: login });
    }
  }
  return problems;
}
