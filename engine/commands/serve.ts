/**
 * `tron serve`: the HTTP API, the live stream and the dashboard of a repository's runs
 * (engine/serve/). It binds 127.0.0.1 unless told otherwise; any other address is
 * refused unless `TRON_SERVE_TOKEN` is set — a token the operator chose and handed out
 * on purpose — since the API lets whoever holds a token answer parked blocks. At every
 * start it issues a fresh token, stores its hash under `.tron/serve/`, and prints the
 * dashboard's URL with the token in its fragment.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import type { Clock } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import { serve, type Serving } from '../serve/server.ts';
import { issueToken } from '../serve/tokens.ts';
import { DatabaseMirror } from '../serve/db-mirror.ts';
import { databaseToRead } from '../log/db-read.ts';
import { redact } from '../log/pg-log.ts';
import { loadConfig, WEBHOOK_SECRET_ENV } from '../project/config.ts';
import type { WebhookOptions } from '../serve/webhook.ts';

/** GitHub's webhooks: the secret from the variable [forge] webhook_secret_env names (never printed), and the forge's repository. */
function webhookOf(repo: string, env: Record<string, string | undefined>): Omit<WebhookOptions, 'repo'> {
  const forge = loadConfig(repo).config?.forge;
  const secretEnv = forge?.webhookSecretEnv ?? WEBHOOK_SECRET_ENV;
  const secret = env[secretEnv] || undefined;
  return { secretEnv, ...(secret && { secret }), ...(forge && { forgeRepo: forge.repo }) };
}

export interface ServeCommandOptions {
  repo: string;
  host?: string;
  port?: number;
  clock: Clock;
  env: Record<string, string | undefined>;
  print: (line: string) => void;
  /** Stops the server (Ctrl-C; tests). */
  signal?: AbortSignal;
  /** --database: serve the runs of tron's database (any host); answers are then refused. */
  database?: string;
  /** Whether --repo was given: with --database, it narrows the runs to that repository's. */
  repoGiven?: boolean;
  /** Called once it listens (tests). */
  onListening?: (s: Serving, token: string) => void;
}

export const DEFAULT_PORT = 4680;

/** Whether a host names this machine only. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '[::1]';
}

export function parsePort(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > 65535) {
    throw new InputError([
      { code: 'TRON_USAGE', path: '--port', message: `"${text}" is not a port; give a number from 0 to 65535 (0: any free port)` },
    ]);
  }
  return n;
}

export async function serveCommand(o: ServeCommandOptions): Promise<number> {
  const repo = resolve(o.repo);
  const source = databaseToRead({
    repo,
    repoGiven: o.repoGiven ?? true,
    ...(o.database !== undefined ? { database: o.database } : {}),
    env: o.env,
  });
  const here = existsSync(join(repo, '.tron'));
  if (!here && !source) {
    throw new InputError([{ code: 'TRON_CONFIG_MISSING', path: repo, message: `${repo} has no .tron/; run tron init --repo ${repo}` }]);
  }
  const host = o.host ?? '127.0.0.1';
  const envToken = o.env.TRON_SERVE_TOKEN || undefined;
  if (!isLoopback(host) && !envToken) {
    throw new InputError([
      {
        code: 'TRON_SERVE_EXPOSED',
        path: '--host',
        message: `${host} is reachable from other machines, and whoever holds a token can answer parked blocks; set TRON_SERVE_TOKEN to a long random secret you hand out on purpose (and put TLS in front), or bind 127.0.0.1`,
      },
    ]);
  }
  // From the database: the run is kept in step in a folder of this serve's own (serve/db-mirror.ts), removed when it stops.
  const scratch = source ? mkdtempSync(join(tmpdir(), 'tron-serve-db-')) : undefined;
  try {
    const mirror = source ? await DatabaseMirror.start(source, join(scratch!, 'runs'), 200, o.clock) : undefined;
    try {
      // Another host may have no repository: its tokens are kept with the mirror.
      const home = here ? repo : scratch!;
      return await serveFrom(o, home, host, envToken, {
        ...(mirror ? { runs: mirror.runs, engineRunning: () => mirror.running, leaseGeneration: () => mirror.generation } : {}),
        ...(o.database !== undefined
          ? {
              readOnly: `this serve shows the runs in ${redact(o.database)}, whose engine may lead from another host; answer on the engine's host (tron answer there)`,
            }
          : {}),
        label: source ? `${redact(source.url)}${source.repository !== undefined ? ` (repository ${source.repository})` : ''}` : repo,
      });
    } finally {
      await mirror?.close();
    }
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}

async function serveFrom(
  o: ServeCommandOptions,
  repo: string,
  host: string,
  envToken: string | undefined,
  from: { runs?: string; engineRunning?: () => boolean; leaseGeneration?: () => number | undefined; readOnly?: string; label: string },
): Promise<number> {
  const token = issueToken(repo, `url-${new Date(o.clock.now()).toISOString()}`, o.clock.now());
  const { label, ...options } = from;
  const webhook = options.readOnly ? undefined : webhookOf(repo, o.env);
  const serving = await serve({
    repo,
    host,
    port: o.port ?? DEFAULT_PORT,
    clock: o.clock,
    ...(envToken ? { envToken } : {}),
    ...options,
    ...(webhook && { webhook }),
  });
  o.print(`tron serve: ${label}`);
  o.print(`  dashboard  ${serving.url}#token=${token}`);
  o.print(`  API        ${serving.url}api/v1/ (Authorization: Bearer TOKEN; ${serving.url}api/v1/openapi.json)`);
  if (webhook?.secret) o.print(`  webhooks   ${serving.url}webhooks/github (GitHub's, signed with the secret in ${webhook.secretEnv})`);
  o.onListening?.(serving, token);
  await new Promise<void>((done) => {
    if (o.signal?.aborted) return done();
    o.signal?.addEventListener('abort', () => done(), { once: true });
  });
  await serving.close();
  return 0;
}
