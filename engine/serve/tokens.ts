/**
 * Who may use `tron serve`'s API: bearer tokens. A token is 32 random bytes (base64url);
 * only its sha256 is kept, in `.tron/serve/tokens.json` (that folder ignores itself in
 * git), so reading the file does not let anyone in. `tron serve` issues a fresh token at
 * every start and prints it once, in the dashboard URL's fragment (a fragment never
 * reaches a server log or a Referer header); `TRON_SERVE_TOKEN` from the environment is
 * accepted too, for scripts. Each row is signed with the repository's key (engine/log/keys.ts),
 * so a row written by anyone but tron — a worker without a sandbox can write `.tron/` —
 * lets nobody in. Every token has a name, and every write through the API
 * records it (`operator.answered.by = "serve:<name>"`).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { repoKey, sign } from '../log/keys.ts';

/** Where the hashes live, relative to the repository. */
export const TOKENS_FILE = join('.tron', 'serve', 'tokens.json');

/** Issued tokens kept; the oldest go first (a dashboard tab of many restarts ago stops working). */
const KEEP = 20;

const TokenRow = z.strictObject({
  name: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  created: z.number(),
  /** The row signed with the repository's key: a row anyone else added is not a token. */
  mac: z.string(),
});
const TokensFile = z.strictObject({ tokens: z.array(TokenRow) });
type TokenRow = z.infer<typeof TokenRow>;

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

const rowMac = (key: Buffer, r: { name: string; sha256: string; created: number }) =>
  sign(key, 'tron serve token', r.name, r.sha256, String(r.created));

function readRows(repo: string): TokenRow[] {
  const file = join(repo, TOKENS_FILE);
  if (!existsSync(file)) return [];
  try {
    return TokensFile.parse(JSON.parse(readFileSync(file, 'utf8'))).tokens;
  } catch {
    // A file that does not read lets nobody in; the next issue rewrites it.
    return [];
  }
}

/** Makes a new token named `name`, stores its hash, and returns the token itself (shown once, never stored). */
export function issueToken(repo: string, name: string, now: number): string {
  const token = randomBytes(32).toString('base64url');
  const dir = join(repo, '.tron', 'serve');
  mkdirSync(dir, { recursive: true });
  // The folder ignores itself, whatever the repository's .gitignore says.
  if (!existsSync(join(dir, '.gitignore'))) writeFileSync(join(dir, '.gitignore'), '*\n');
  const key = repoKey(repo, { create: true }).key;
  const row = { name, sha256: sha256(token), created: now };
  const rows = [...readRows(repo), { ...row, mac: rowMac(key, row) }].slice(-KEEP);
  const tmp = join(dir, '.tokens.json.tmp');
  writeFileSync(tmp, `${JSON.stringify({ tokens: rows }, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, join(repo, TOKENS_FILE));
  return token;
}

/** Checks bearer tokens against the stored hashes (re-read when the file changes) and the environment's token. */
export class TokenCheck {
  private rows: TokenRow[] = [];
  private seen = '';
  private readonly envHash: string | undefined;

  constructor(
    private readonly repo: string,
    envToken: string | undefined,
  ) {
    this.envHash = envToken ? sha256(envToken) : undefined;
  }

  /** The token's name when `header` carries a valid `Bearer TOKEN`, else undefined. */
  who(header: string | undefined): string | undefined {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    if (!m) return undefined;
    const hash = Buffer.from(sha256(m[1]!), 'hex');
    if (this.envHash && timingSafeEqual(hash, Buffer.from(this.envHash, 'hex'))) return 'env';
    this.reload();
    for (const row of this.rows) if (timingSafeEqual(hash, Buffer.from(row.sha256, 'hex'))) return row.name;
    return undefined;
  }

  private reload(): void {
    const file = join(this.repo, TOKENS_FILE);
    let stamp = 'none';
    try {
      const s = statSync(file);
      stamp = `${s.mtimeMs}:${s.size}`;
    } catch {
      // No file: no stored token.
    }
    if (stamp === this.seen) return;
    this.seen = stamp;
    const key = repoKey(this.repo)?.key;
    // A worker without a sandbox could write the file; only rows tron signed let anyone in.
    this.rows = key ? readRows(this.repo).filter((r) => r.mac === rowMac(key, r)) : [];
  }
}
