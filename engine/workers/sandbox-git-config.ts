/**
 * git config files as a sandboxed worker or test sees them: without what carries a
 * credential (issue #44). A builder needs the user's git config (their identity, their
 * aliases) and the repository's (its format, its extensions), so neither can simply be
 * hidden; but `url.<https://token@host/>.insteadOf`, `credential.helper`,
 * `http.extraHeader = Authorization: …` and a remote URL with a user and password in
 * `.git/config` are each a way to the user's credentials. So each such file is shown as a
 * copy without them:
 *
 * - dropped: `credential.*`, `url.*`, `http.*.extraHeader`, `http.*.cookieFile`,
 *   `core.askPass`, `sendemail.*.smtpPass`;
 * - any `scheme://user:password@` in what is kept (a remote's URL, an `http.<url>.*`
 *   section) loses its user information;
 * - a file it includes (`include.path`, `includeIf.*.path`) is shown the same way.
 *
 * The copy is made with `git config --list` (git's own parser, no includes followed) and
 * written back in git's syntax; a file git cannot parse reads as empty inside. Copies are
 * made again only when a file changed (its inode, size and time).
 */
import { mkdtempSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { execa } from 'execa';
import { gitEnv } from '../git/run.ts';

/** Keys whose value (or whose subsection, for `url.*`) is, or reaches, a credential. */
const DROPPED = /^(credential\..+|url\..+|http\.(.+\.)?(extraheader|cookiefile)|core\.askpass|sendemail\.(.+\.)?smtppass)$/i;

/** The include keys, whose value names another config file. */
const INCLUDE = /^(include|includeif\..+)\.path$/i;

/** `scheme://userinfo@` anywhere in a string: the user information goes. */
const USERINFO = /([a-z][a-z0-9+.-]*:\/\/)[^/@\s"]*@/gi;

/** A bind of a sanitized copy over the file it stands for. */
export interface ConfigCopy {
  src: string;
  dest: string;
}

/** The config files git reads beyond the repository's own (system, global) for an environment. */
export function userGitConfigs(env: Readonly<Record<string, string | undefined>>): string[] {
  const files: string[] = [];
  const noSystem = ['1', 'true', 'yes', 'on'].includes((env.GIT_CONFIG_NOSYSTEM ?? '').toLowerCase());
  if (!noSystem) files.push(env.GIT_CONFIG_SYSTEM || '/etc/gitconfig');
  const home = env.HOME && isAbsolute(env.HOME) ? env.HOME : undefined;
  if (env.GIT_CONFIG_GLOBAL) files.push(env.GIT_CONFIG_GLOBAL);
  else {
    const xdg = env.XDG_CONFIG_HOME && isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : home && join(home, '.config');
    if (xdg) files.push(join(xdg, 'git', 'config'));
    if (home) files.push(join(home, '.gitconfig'));
  }
  return files.filter((f) => isAbsolute(f));
}

/** One entry of `git config --list -z`: a key, and a value unless it was written without one. */
interface Entry {
  key: string;
  value?: string;
}

function stamp(file: string): string | undefined {
  try {
    const s = statSync(file);
    return s.isFile() ? `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}` : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Makes sanitized copies of config files, under one folder of its own, and remembers them
 * while the files are unchanged. `remove` takes the folder away (the engine's exit).
 */
export class ConfigSanitizer {
  private dir: string | undefined;
  private readonly made = new Map<string, { stamps: Array<[string, string | undefined]>; copies: ConfigCopy[] }>();
  private count = 0;

  constructor(private readonly root: string) {}

  /** The copies to bind over `files` (and the files they include) so that nothing in them reaches a credential. */
  async copiesFor(files: readonly string[]): Promise<ConfigCopy[]> {
    const out: ConfigCopy[] = [];
    for (const file of files) out.push(...(await this.copiesOf(file)));
    return out;
  }

  remove(): void {
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
    this.made.clear();
  }

  private async copiesOf(file: string): Promise<ConfigCopy[]> {
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      return [];
    }
    const known = this.made.get(real);
    if (known?.stamps.every(([f, s]) => stamp(f) === s)) return known.copies;
    const stamps: Array<[string, string | undefined]> = [];
    const copies: ConfigCopy[] = [];
    await this.sanitize(real, stamps, copies, 0);
    this.made.set(real, { stamps, copies });
    return copies;
  }

  private async sanitize(file: string, stamps: Array<[string, string | undefined]>, copies: ConfigCopy[], depth: number): Promise<void> {
    if (depth > 10 || stamps.some(([f]) => f === file)) return;
    const before = stamp(file);
    stamps.push([file, before]);
    if (before === undefined) return;
    const listed = await execa('git', ['config', '--file', file, '--no-includes', '-z', '--list'], {
      env: gitEnv(process.env),
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      cwd: dirname(file),
    });
    if (listed.exitCode !== 0) {
      // git cannot read it: nothing of it is shown.
      copies.push({ src: this.write(''), dest: file });
      return;
    }
    const entries: Entry[] = String(listed.stdout)
      .split('\0')
      .filter((e) => e !== '')
      .map((e) => {
        const nl = e.indexOf('\n');
        return nl < 0 ? { key: e } : { key: e.slice(0, nl), value: e.slice(nl + 1) };
      });
    const kept: Entry[] = [];
    let changed = false;
    for (const entry of entries) {
      if (DROPPED.test(entry.key)) {
        changed = true;
        continue;
      }
      const key = entry.key.replace(USERINFO, '$1');
      const value = entry.value?.replace(USERINFO, '$1');
      if (key !== entry.key || value !== entry.value) changed = true;
      kept.push(value === undefined ? { key } : { key, value });
      if (INCLUDE.test(entry.key) && entry.value) {
        const target = includeTarget(entry.value, file);
        if (target) {
          let real: string | undefined;
          try {
            real = realpathSync(target);
          } catch {
            real = undefined;
          }
          if (real) await this.sanitize(real, stamps, copies, depth + 1);
        }
      }
    }
    if (changed) copies.push({ src: this.write(configText(kept)), dest: file });
  }

  private write(text: string): string {
    if (!this.dir) this.dir = mkdtempSync(join(this.root, `tron-config-${process.pid}-`));
    this.count += 1;
    const path = join(this.dir, `config-${this.count}`);
    writeFileSync(path, text, { mode: 0o644 });
    return path;
  }
}

/** Where an include's path points, as git resolves it: `~/` under HOME, relative to the including file. */
function includeTarget(path: string, from: string): string | undefined {
  if (path.startsWith('~/')) {
    const home = process.env.HOME;
    return home && isAbsolute(home) ? join(home, path.slice(2)) : undefined;
  }
  return resolve(dirname(from), path);
}

/** Entries written back in git's config syntax, each section opened where its entries begin. */
export function configText(entries: readonly Entry[]): string {
  const lines: string[] = [];
  let open: string | undefined;
  for (const { key, value } of entries) {
    const first = key.indexOf('.');
    const last = key.lastIndexOf('.');
    if (first < 0) continue;
    const section = key.slice(0, first);
    const sub = last > first ? key.slice(first + 1, last) : undefined;
    const name = key.slice(last + 1);
    const header = sub === undefined ? `[${section}]` : `[${section} "${sub.replace(/[\\"]/g, (c) => `\\${c}`)}"]`;
    if (header !== open) {
      lines.push(header);
      open = header;
    }
    lines.push(value === undefined ? `\t${name}` : `\t${name} = "${escapeValue(value)}"`);
  }
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

function escapeValue(value: string): string {
  return value.replace(/[\\"\n\t\b]/g, (c) => ({ '\\': '\\\\', '"': '\\"', '\n': '\\n', '\t': '\\t', '\b': '\\b' })[c]!);
}
