/**
 * The sandbox, tried as a hostile builder would: real bwrap, real git, real processes.
 * Each test runs a shell script inside the sandbox exactly as a worker's command runs,
 * then looks from outside at what changed.
 */
import { type Reachable, reachableServer } from '../testing/reachable.ts';
import { createServer as createNetServer } from 'node:net';
import { credentialPaths } from '../git/remote.ts';
import { minimalEnv } from './env.ts';
import { makeBareRemote, serveHttp } from '../testing/remote-server.ts';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BWRAP, BWRAP_SKIP } from '../testing/bwrap.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { fsck } from '../testing/store.ts';
import * as git from '../git/index.ts';
import type { TurnRequest } from './adapter.ts';
import { configText, userGitConfigs } from './sandbox-git-config.ts';
import { bwrapArgs, bwrapSandbox, chooseSandbox, expandWritable, turnConfinement, type Confinement, type LeaveReport } from './sandbox.ts';
import { turnRequest } from '../testing/workers.ts';

describe('writable paths and bwrap arguments (no bwrap needed)', () => {
  it('never hands the ssh agent to a worker or test, even one whose env list names it', () => {
    const env = minimalEnv({ PATH: '/bin', SSH_AUTH_SOCK: '/run/agent.sock', SSH_HOST: 'h' }, ['SSH_*', 'SSH_AUTH_SOCK']);
    expect(env).toEqual({ PATH: '/bin', SSH_HOST: 'h' });
    expect(
      credentialPaths(
        { HOME: '/home/ada', SSH_AUTH_SOCK: '/run/agent.sock' },
        { config: [['credential.helper', 'store --file=~/.creds']], env: {} },
      ),
    ).toEqual(
      expect.arrayContaining([
        '/home/ada/.git-credentials',
        '/home/ada/.ssh',
        '/home/ada/.config/git/credentials',
        '/run/agent.sock',
        '/home/ada/.creds',
      ]),
    );
  });

  it('names every place git, ssh, curl and libpq take credentials from, where the environment moves them too', () => {
    const paths = credentialPaths(
      {
        HOME: '/home/ada',
        XDG_CACHE_HOME: '/cache',
        NETRC: '/etc/ada.netrc',
        PGPASSFILE: '/srv/pgpass',
        PGSERVICEFILE: '/srv/services',
        PGSYSCONFDIR: '/etc/pg',
        GIT_ASKPASS: '/usr/local/bin/token-askpass',
        SSH_ASKPASS: '/usr/bin/ssh-askpass',
        DOCKER_CONFIG: '/home/ada/docker',
      },
      { config: [['credential.https://example.com.helper', 'cache --timeout 60 --socket ~/run/creds/socket']], env: {} },
    );
    expect(paths).toEqual(
      expect.arrayContaining([
        '/home/ada/.netrc',
        '/home/ada/_netrc',
        '/etc/ada.netrc',
        '/home/ada/.pgpass',
        '/srv/pgpass',
        '/home/ada/.pg_service.conf',
        '/srv/services',
        '/etc/pg/pg_service.conf',
        '/home/ada/.git-credential-cache',
        '/cache/git/credential',
        '/home/ada/run/creds',
        '/usr/local/bin/token-askpass',
        '/usr/bin/ssh-askpass',
        '/home/ada/docker/config.json',
        '/home/ada/.config/gh/hosts.yml',
        '/home/ada/.aws',
        '/home/ada/.kube',
        '/home/ada/.config/gcloud',
      ]),
    );
  });

  it('writes a sanitized git config back in git syntax: subsections, quoting and bare booleans kept', () => {
    expect(
      configText([
        { key: 'core.bare' },
        { key: 'core.editor', value: 'vim "x"\\y' },
        { key: 'remote.my "o".url', value: 'https://host/r' },
      ]),
    ).toBe('[core]\n\tbare\n\teditor = "vim \\"x\\"\\\\y"\n[remote "my \\"o\\""]\n\turl = "https://host/r"\n');
  });

  it('expands ~/ and $NAME/ and keeps absolute paths; an unset variable drops its entry', () => {
    const env = { HOME: '/home/u', CODEX_HOME: '/data/codex' };
    expect(expandWritable(['~/.claude', '~', '$CODEX_HOME', '$CODEX_HOME/logs', '/var/cache/x', '$UNSET/y'], env)).toEqual([
      '/home/u/.claude',
      '/home/u',
      '/data/codex',
      '/data/codex/logs',
      '/var/cache/x',
    ]);
  });

  it('mounts shallow paths first, so a read-only file inside a writable folder stays read-only', () => {
    const args = bwrapArgs({
      cwd: '/w',
      network: false,
      mounts: [
        { kind: 'ro', src: '/w/.git', dest: '/w/.git' },
        { kind: 'rw', src: '/w', dest: '/w' },
      ],
    });
    expect(args.join(' ')).toMatch(/--ro-bind \/ \/ .*--unshare-net --bind \/w \/w --ro-bind \/w\/.git \/w\/.git --chdir \/w$/);
    expect(args).toContain('--die-with-parent');
    expect(args).toContain('--unshare-pid');
    expect(args.join(' ')).toContain('--cap-drop ALL');
  });

  it('mode "off" never sandboxes; mode "bwrap" without a working bwrap is a coded config error', async () => {
    expect((await chooseSandbox('off', process.env)).sandbox.kind).toBe('off');
    const bin = mkdtempSync(join(tmpdir(), 'tron-no-bwrap-'));
    try {
      writeFileSync(join(bin, 'bwrap'), '#!/bin/sh\necho "bwrap: No permissions to create a new namespace" >&2\nexit 1\n', { mode: 0o755 });
      const auto = await chooseSandbox('auto', { PATH: bin });
      expect(auto.sandbox.kind).toBe('off');
      expect(auto.notice).toMatch(/NOT sandboxed — .*No permissions to create a new namespace/);
      await expect(chooseSandbox('bwrap', { PATH: bin })).rejects.toMatchObject({
        problems: [{ code: 'TRON_SANDBOX_UNAVAILABLE', path: '.tron/config.toml: sandbox.mode' }],
      });
      await expect(chooseSandbox('bwrap', { PATH: join(bin, 'none') })).rejects.toMatchObject({
        problems: [{ code: 'TRON_SANDBOX_UNAVAILABLE', message: expect.stringMatching(/no bwrap on PATH/) }],
      });
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });
});

describe.skipIf(BWRAP_SKIP !== undefined)('a sandboxed worker', () => {
  const sandbox = bwrapSandbox(BWRAP ?? 'bwrap');
  let repo: TestRepo;
  let common: string;
  let home: string;
  const wt = (id: string) => git.worktreePath(repo.dir, id);

  beforeAll(async () => {
    repo = await makeRepo({
      'README.md': '# app\n',
      '.tron/.gitignore': 'runs/\nworktrees/\ninbox/\n',
      '.tron/config.toml': 'test = "node test.js"\n',
      '.tron/blocks/a.md': '+++\ntitle = "A"\ncriteria = ["a"]\n+++\n',
    });
    const base = await repo.git('rev-parse', 'HEAD');
    await git.createWorktree(repo.dir, { id: 'a', base });
    await git.createWorktree(repo.dir, { id: 'b', base });
    mkdirSync(join(repo.dir, '.tron', 'inbox'), { recursive: true });
    mkdirSync(join(repo.dir, '.tron', 'runs', 'r1'), { recursive: true });
    writeFileSync(join(repo.dir, '.tron', 'runs', 'r1', 'events.jsonl'), '{"seq":1}\n');
    common = join(repo.dir, '.git');
    home = mkdtempSync(join(tmpdir(), 'tron-home-'));
    mkdirSync(join(home, '.claude'));
    writeFileSync(join(home, '.claude.json'), '{}\n');
    writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Home\n');
  });
  afterAll(async () => {
    await repo?.cleanup();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const request = (role: TurnRequest['role'], block: string, cwd: string): TurnRequest => turnRequest(repo.dir, role, block, cwd);

  /** Runs `script` by sh in the sandbox as `confinement` says; the leave report once it ended. */
  async function run(confinement: Confinement, script: string, env: Record<string, string> = {}) {
    const entered = await sandbox.enter(['sh', '-c', script], confinement);
    const [file, ...args] = entered.argv;
    const result = await execa(file!, args, {
      cwd: confinement.cwd,
      env: { PATH: process.env.PATH ?? '', HOME: home, REPO: repo.dir, COMMON: common, ...env },
      extendEnv: false,
      reject: false,
    });
    const left: LeaveReport = await entered.leave();
    // The markers the scripts echo are on stdout; git's and the shell's complaints on stderr.
    return { code: result.exitCode, out: String(result.stdout), err: String(result.stderr), left };
  }

  const builder = (block = 'a', writable: string[] = []) =>
    turnConfinement(request('builder', block, wt(block)), writable, { HOME: home, PATH: process.env.PATH });

  it('commits on its own branch, which moves to that commit, by the engine, once the process has ended', async () => {
    const before = await repo.git('rev-parse', 'tron/a');
    const entered = await sandbox.enter(
      ['sh', '-c', 'echo one > one.txt && git add one.txt && git commit -q -m one && git rev-parse HEAD'],
      builder(),
    );
    const [file, ...args] = entered.argv;
    const result = await execa(file!, args, { cwd: wt('a'), reject: false, all: true });
    expect(result.exitCode, String(result.all)).toBe(0);
    const made = String(result.stdout).trim();
    // Inside, the worker moved a private copy of its branch: the real one waits for the engine.
    expect(await repo.git('rev-parse', 'tron/a')).toBe(before);
    expect(await entered.leave()).toEqual({ moved: { from: before, to: made } });
    expect(await repo.git('rev-parse', 'tron/a')).toBe(made);
    expect(await repo.git('log', '-1', '--format=%gs', '-g', 'tron/a')).toBe('tron: commits of the sandboxed builder');
    expect(await repo.at(wt('a')).git('status', '--porcelain')).toBe('');
  });

  it("cannot move trunk, another block's branch, a landed record, or make a branch", async () => {
    const main = await repo.git('rev-parse', 'main');
    const b = await repo.git('rev-parse', 'tron/b');
    const { out, left } = await run(
      builder(),
      [
        'git commit -q --allow-empty -m two',
        'git update-ref refs/heads/main HEAD; echo "main $?"',
        'git push -q . HEAD:main; echo "push $?"',
        'git update-ref refs/heads/tron/b HEAD; echo "b $?"',
        'git update-ref refs/tron/landed/a HEAD; echo "landed $?"',
        'git branch other; echo "branch $?"',
        'git tag v1; echo "tag $?"',
      ].join('\n'),
    );
    for (const what of ['main', 'push', 'landed', 'branch', 'tag']) expect(out).toMatch(new RegExp(`^${what} [1-9]`, 'm'));
    // tron/b "moved" only in the worker's private view of refs/heads/tron/, which is thrown away.
    expect(left.moved?.to).toBe(await repo.at(wt('a')).git('rev-parse', 'HEAD'));
    expect(await repo.git('rev-parse', 'main')).toBe(main);
    expect(await repo.git('rev-parse', 'tron/b')).toBe(b);
    expect(await repo.git('for-each-ref', '--format=%(refname)', 'refs/tron/', 'refs/tags/', 'refs/heads/other')).toBe('');
  });

  it('refuses a branch the worker left as a link or a FIFO, without following or waiting on it', async () => {
    const before = await repo.git('rev-parse', 'tron/a');
    const link = await run(builder(), 'ln -sf "$COMMON/refs/heads/main" "$COMMON/refs/heads/tron/a" && echo linked');
    expect(link.out).toMatch(/^linked$/m);
    expect(link.left).toEqual({ problem: expect.stringContaining('something other than a commit id') });
    const fifo = await run(builder(), 'rm -f "$COMMON/refs/heads/tron/a" && mkfifo "$COMMON/refs/heads/tron/a" && echo fifo');
    expect(fifo.out).toMatch(/^fifo$/m);
    expect(fifo.left).toEqual({ problem: expect.stringContaining('something other than a commit id') });
    expect(await repo.git('rev-parse', 'tron/a')).toBe(before);
  });

  it("cannot write .tron/ (config, blocks, inbox, runs), the user's checkout, git's config, hooks or index", async () => {
    const { out } = await run(
      builder(),
      [
        'echo \'test = "true"\' > "$REPO/.tron/config.toml"; echo "config $?"',
        'echo evil > "$REPO/.tron/blocks/evil.md"; echo "blocks $?"',
        'echo ">>ABANDON" > "$REPO/.tron/inbox/a.answer"; echo "inbox $?"',
        'echo \'{"seq":2}\' >> "$REPO/.tron/runs/r1/events.jsonl"; echo "runs $?"',
        'echo changed > "$REPO/README.md"; echo "checkout $?"',
        'git -C "$REPO" update-index --skip-worktree README.md; echo "index $?"',
        'git config core.hooksPath /tmp; echo "gitconfig $?"',
        'git config core.fsmonitor "touch /tmp/x"; echo "fsmonitor $?"',
        'printf "#!/bin/sh\\n" > "$COMMON/hooks/post-checkout"; echo "hooks $?"',
        'echo "* filter=evil" > "$COMMON/info/attributes"; echo "info $?"',
        'echo "[user]" >> "$HOME/.gitconfig"; echo "homegitconfig $?"',
      ].join('\n'),
    );
    for (const what of [
      'config',
      'blocks',
      'inbox',
      'runs',
      'checkout',
      'index',
      'gitconfig',
      'fsmonitor',
      'hooks',
      'info',
      'homegitconfig',
    ])
      expect(out).toMatch(new RegExp(`^${what} [1-9]`, 'm'));
    expect(readFileSync(join(repo.dir, '.tron', 'config.toml'), 'utf8')).toBe('test = "node test.js"\n');
    expect(existsSync(join(repo.dir, '.tron', 'blocks', 'evil.md'))).toBe(false);
    expect(existsSync(join(repo.dir, '.tron', 'inbox', 'a.answer'))).toBe(false);
    expect(readFileSync(join(repo.dir, '.tron', 'runs', 'r1', 'events.jsonl'), 'utf8')).toBe('{"seq":1}\n');
    expect(await repo.git('status', '--porcelain')).toBe('');
    expect(await repo.git('ls-files', '-v', 'README.md')).toBe('H README.md');
    expect(await repo.git('config', '--get', 'core.hooksPath').catch(() => 'unset')).toBe('unset');
    expect(existsSync(join(common, 'hooks', 'post-checkout'))).toBe(false);
    expect(existsSync(join(common, 'info', 'attributes'))).toBe(false);
    expect(readFileSync(join(home, '.gitconfig'), 'utf8')).toBe('[user]\n\tname = Home\n');
  });

  it("cannot point the engine's git calls elsewhere: its .git file, commondir, gitdir, config.worktree, alternates", async () => {
    const { out } = await run(
      builder(),
      [
        'echo "gitdir: /elsewhere" > .git; echo "dotgit $?"',
        'rm -f .git; echo "rmdotgit $?"',
        'echo /elsewhere > "$COMMON/worktrees/a/commondir"; echo "commondir $?"',
        'echo /elsewhere > "$COMMON/worktrees/a/gitdir"; echo "gitdir $?"',
        'printf "[core]\\n\\tfsmonitor = evil\\n" > "$COMMON/worktrees/a/config.worktree"; echo "worktreeconfig $?"',
        'echo /elsewhere/objects > "$COMMON/objects/info/alternates"; echo "alternates $?"',
      ].join('\n'),
    );
    for (const what of ['dotgit', 'rmdotgit', 'commondir', 'gitdir', 'worktreeconfig', 'alternates'])
      expect(out).toMatch(new RegExp(`^${what} [1-9]`, 'm'));
    expect(readFileSync(join(wt('a'), '.git'), 'utf8')).toMatch(/^gitdir: .*\.git\/worktrees\/a$/m);
    expect(readFileSync(join(common, 'worktrees', 'a', 'config.worktree'), 'utf8')).toBe('');
    expect(existsSync(join(common, 'objects', 'info', 'alternates'))).toBe(false);
  });

  it('has no capabilities, so it cannot remount the file system writable even when tron runs as root', async () => {
    const { out } = await run(builder(), 'grep CapEff /proc/self/status; mount -o remount,rw,bind / 2>&1; echo "remount $?"');
    expect(out).toMatch(/^CapEff:\s+0+$/m);
    expect(out).toMatch(/^remount [1-9]/m);
  });

  it('writes the paths its writable list names, and nothing else of HOME', async () => {
    const { out } = await run(
      builder('a', ['~/.claude', '~/.claude.json']),
      [
        'echo state > "$HOME/.claude/state"; echo "claude $?"',
        'echo \'{"n":1}\' > "$HOME/.claude.json"; echo "claudejson $?"',
        'echo x > "$HOME/.claude.json.tmp.1"; echo "sibling $?"',
        'echo x > "$HOME/.bashrc"; echo "bashrc $?"',
      ].join('\n'),
    );
    expect(out).toMatch(/^claude 0$/m);
    expect(out).toMatch(/^claudejson 0$/m);
    expect(out).toMatch(/^sibling [1-9]/m);
    expect(out).toMatch(/^bashrc [1-9]/m);
    expect(readFileSync(join(home, '.claude', 'state'), 'utf8')).toBe('state\n');
    expect(readFileSync(join(home, '.claude.json'), 'utf8')).toBe('{"n":1}\n');
    expect(existsSync(join(home, '.bashrc'))).toBe(false);
  });

  it("cannot read or change tron's own state (the repository keys), even with all of HOME writable", async () => {
    const state = join(home, '.local', 'state', 'tron');
    mkdirSync(join(state, 'repo1'), { recursive: true });
    writeFileSync(join(state, 'repo1', 'key'), 'secret\n');
    const entered = await bwrapSandbox(BWRAP ?? 'bwrap', [state]).enter(
      [
        'sh',
        '-c',
        `cat "${state}/repo1/key"; echo "read $?"; ls -A "${state}" | wc -l; echo forged > "${state}/repo1/key"; echo "write $?"`,
      ],
      { ...builder('a', ['~']) },
    );
    const [file, ...args] = entered.argv;
    const result = await execa(file!, args, { env: { PATH: process.env.PATH ?? '', HOME: home }, extendEnv: false, reject: false });
    await entered.leave();
    const out = String(result.stdout);
    expect(out).toMatch(/^read [1-9]/m);
    expect(out).not.toContain('secret');
    expect(out).toMatch(/^0$/m);
    expect(readFileSync(join(state, 'repo1', 'key'), 'utf8')).toBe('secret\n');
    // The same turn without the hidden folder reads it: the test sees what hiding changes.
    const open = await run(builder('a', ['~']), `cat "${state}/repo1/key"`);
    expect(open.out).toBe('secret');
  });

  it("cannot read the user's git credentials, their ssh keys or reach their ssh agent, even with all of HOME writable", async () => {
    writeFileSync(join(home, '.git-credentials'), 'https://ada:s3cret-token@example.com\n');
    mkdirSync(join(home, '.ssh'), { recursive: true });
    writeFileSync(join(home, '.ssh', 'id_ed25519'), 'PRIVATE KEY\n');
    const sock = join(home, 'agent.sock');
    const agent = createNetServer((c) => c.end('agent'));
    await new Promise<void>((done) => agent.listen(sock, () => done()));
    const script = [
      'cat ~/.git-credentials; echo "creds $?"',
      'cat ~/.ssh/id_ed25519; echo "key $?"',
      `node -e "require('net').connect(process.argv[1]).on('data',(d)=>{console.log('agent ' + d);process.exit(0)}).on('error',()=>{console.log('agent refused');process.exit(0)})" ${sock}`,
    ].join('; ');
    try {
      const hidden = credentialPaths({ HOME: home, SSH_AUTH_SOCK: sock });
      const entered = await bwrapSandbox(BWRAP ?? 'bwrap', hidden).enter(['sh', '-c', script], builder('a', ['~']));
      const [file, ...args] = entered.argv;
      const result = await execa(file!, args, { env: { PATH: process.env.PATH ?? '', HOME: home }, extendEnv: false, reject: false });
      await entered.leave();
      const out = String(result.stdout);
      expect(out).not.toContain('s3cret-token');
      expect(out).not.toContain('PRIVATE KEY');
      expect(out).toMatch(/^agent refused$/m);
      // The same turn without hiding reads both and reaches the agent: the test sees what hiding changes.
      const open = await run(builder('a', ['~']), script);
      expect(open.out).toContain('s3cret-token');
      expect(open.out).toMatch(/^agent agent$/m);
    } finally {
      await new Promise<void>((done) => agent.close(() => done()));
    }
  });

  it('cannot reach a password through .netrc, .pgpass, an insteadOf URL, the remote URL in .git/config or the credential cache, as it can outside', async () => {
    const bare = await makeBareRemote();
    const served = await serveHttp(bare, { user: 'ada', password: 'wire-pass' });
    const env = { PATH: process.env.PATH ?? '', HOME: home, GIT_TERMINAL_PROMPT: '0' };
    const cache = (action: string, input: string) =>
      execa('git', ['credential-cache', action], { input, env, extendEnv: false, reject: false });
    try {
      await repo.git('push', '-q', bare.dir, 'main');
      writeFileSync(join(home, '.netrc'), 'machine db.example.com login ada password netrc-pass\n');
      writeFileSync(join(home, '.pgpass'), 'db.example.com:5432:*:ada:pgpass-pass\n');
      mkdirSync(join(home, '.docker'), { recursive: true });
      writeFileSync(join(home, '.docker', 'config.json'), '{"auths":{"r.example.com":{"auth":"ZG9ja2VyLXBhc3M="}}}\n');
      writeFileSync(
        join(home, '.gitconfig'),
        `[user]\n\tname = Home\n[url "http://ada:wire-pass@127.0.0.1:${served.port}/"]\n\tinsteadOf = http://forge.invalid/\n`,
      );
      await repo.git('remote', 'add', 'origin', `http://ada:wire-pass@127.0.0.1:${served.port}/repo.git`);
      // git's credential-cache daemon, holding the password, listening on ~/.cache/git/credential/socket.
      expect((await cache('store', `protocol=http\nhost=127.0.0.1:${served.port}\nusername=ada\npassword=cache-pass\n\n`)).exitCode).toBe(
        0,
      );
      const script = [
        'cat ~/.netrc ~/.pgpass ~/.docker/config.json ~/.gitconfig "$COMMON/config"',
        `printf 'protocol=http\\nhost=127.0.0.1:${served.port}\\n\\n' | git credential-cache get; echo "cache $?"`,
        'git ls-remote http://forge.invalid/repo.git main >/dev/null 2>&1; echo "insteadof $?"',
        'git ls-remote origin main >/dev/null 2>&1; echo "remote $?"',
        'echo "name $(git config --global user.name)"',
        'git status --porcelain >/dev/null; echo "status $?"',
      ].join('\n');
      const hidden = credentialPaths({ HOME: home });
      const entered = await bwrapSandbox(BWRAP ?? 'bwrap', hidden, userGitConfigs({ HOME: home })).enter(
        ['sh', '-c', script],
        builder('a'),
      );
      const [file, ...args] = entered.argv;
      const inside = await execa(file!, args, { cwd: wt('a'), env: { ...env, COMMON: common }, extendEnv: false, reject: false });
      await entered.leave();
      const out = String(inside.stdout);
      for (const secret of ['netrc-pass', 'pgpass-pass', 'ZG9ja2VyLXBhc3M=', 'wire-pass', 'cache-pass']) expect(out).not.toContain(secret);
      expect(out).toMatch(/^insteadof [1-9]/m);
      expect(out).toMatch(/^remote [1-9]/m);
      // What the worker needs of the same files is still there: its identity, a repository git can read.
      expect(out).toMatch(/^name Home$/m);
      expect(out).toMatch(/^status 0$/m);
      // Outside, the same script reads every one of them and reaches the remote: the test sees what the sandbox takes away.
      const outside = await execa('sh', ['-c', script], { cwd: wt('a'), env: { ...env, COMMON: common }, extendEnv: false, reject: false });
      const open = String(outside.stdout);
      for (const secret of ['netrc-pass', 'pgpass-pass', 'ZG9ja2VyLXBhc3M=', 'wire-pass', 'cache-pass']) expect(open).toContain(secret);
      expect(open).toMatch(/^insteadof 0$/m);
      expect(open).toMatch(/^remote 0$/m);
    } finally {
      await cache('exit', '');
      await repo.git('remote', 'remove', 'origin').catch(() => undefined);
      await served.stop();
      await bare.cleanup();
      for (const f of ['.netrc', '.pgpass', '.docker']) rmSync(join(home, f), { recursive: true, force: true });
      writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Home\n');
    }
  });

  it('cannot push to a remote that needs the user’s credentials, which the same push outside the sandbox has', async () => {
    const bare = await makeBareRemote();
    const served = await serveHttp(bare, { user: 'ada', password: 'push-pass' });
    try {
      await repo.git('push', '-q', bare.dir, 'main');
      const before = await bare.git('rev-parse', 'main');
      writeFileSync(join(home, '.git-credentials'), `http://ada:push-pass@127.0.0.1:${served.port}\n`);
      writeFileSync(join(home, '.gitconfig'), `[user]\n\tname = Home\n[credential]\n\thelper = store\n`);
      const tree = repo.at(wt('a'));
      await tree.write('pushed.txt', 'by the worker\n');
      const head = await tree.commitAll('a worker pushes to trunk');
      const script = `git push -q ${served.url} ${head}:refs/heads/main 2>&1; echo "push $?"`;
      const hidden = credentialPaths({ HOME: home });
      const entered = await bwrapSandbox(BWRAP ?? 'bwrap', hidden).enter(['sh', '-c', script], builder('a'));
      const [file, ...args] = entered.argv;
      const env = { PATH: process.env.PATH ?? '', HOME: home, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1' };
      const result = await execa(file!, args, { cwd: wt('a'), env, extendEnv: false, reject: false });
      await entered.leave();
      expect(String(result.stdout)).toMatch(/^push [1-9]/m);
      expect(await bare.git('rev-parse', 'main')).toBe(before);
      // Outside the sandbox, the same push with the same HOME goes through: the credentials are what the sandbox took away.
      const outside = await execa('sh', ['-c', script], { cwd: wt('a'), env, extendEnv: false, reject: false });
      expect(String(outside.stdout)).toMatch(/^push 0$/m);
      expect(await bare.git('rev-parse', 'main')).toBe(head);
    } finally {
      await served.stop();
      await bare.cleanup();
      rmSync(join(home, '.git-credentials'), { force: true });
      writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Home\n');
    }
  });

  it('has a private /tmp', async () => {
    const marker = join(tmpdir(), `tron-private-tmp-${process.pid}`);
    const { out } = await run(builder(), `echo inside > ${marker}; echo "tmp $?"; ls /tmp | grep -c tron-repo- || true`);
    expect(out).toMatch(/^tmp 0$/m);
    expect(existsSync(marker)).toBe(false);
  });

  it("leaves the reviewer's checkout and the architect's view of the repository read-only", async () => {
    const sha = await repo.git('rev-parse', 'main');
    const review = await git.createReviewCheckout(repo.dir, { id: 'a', sha });
    const env = { HOME: home, PATH: process.env.PATH };
    const reviewer = await run(
      turnConfinement(request('reviewer', 'a', review), [], env),
      'echo x > x.txt; echo "file $?"; git commit -q --allow-empty -m r; echo "commit $?"',
    );
    expect(reviewer.out).toMatch(/^file [1-9]/m);
    expect(reviewer.out).toMatch(/^commit [1-9]/m);
    const architect = await run(
      turnConfinement(request('architect', 'a', repo.dir), [], env),
      'echo x > x.txt; echo "file $?"; git log --oneline -1 >/dev/null; echo "read $?"',
    );
    expect(architect.out).toMatch(/^file [1-9]/m);
    expect(architect.out).toMatch(/^read 0$/m);
    expect(await repo.at(review).git('rev-parse', 'HEAD')).toBe(sha);
    await git.removeWorktree(repo.dir, review);
  });

  it('a builder turn whose cwd is not a worktree of the engine writes nothing', async () => {
    const { out } = await run(
      turnConfinement(request('builder', 'a', repo.dir), [], { HOME: home, PATH: process.env.PATH }),
      'echo x > x.txt; echo "file $?"',
    );
    expect(out).toMatch(/^file [1-9]/m);
  });

  describe('the network', () => {
    let server: Reachable;
    let url = '';
    beforeAll(async () => {
      server = await reachableServer();
      url = server.url;
    });
    afterAll(() => server.close());

    const fetchScript = () =>
      `node -e "fetch('${url}').then((r) => r.text()).then((t) => console.log(t), (e) => console.log('unreachable', e.cause?.code ?? e.message))"`;

    it('is there for workers (they call model APIs)', async () => {
      expect((await run(builder(), fetchScript())).out).toMatch(/^reached$/m);
    });

    it('is not there when the confinement says so (test runs, unless configured)', async () => {
      expect((await run({ ...builder(), network: false }, fetchScript())).out).toMatch(/^unreachable/m);
    });
  });

  it("leaves the user's repository whole after every worker above: git fsck is clean", async () => {
    expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
  });
});
