import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  fetchTrunkAndWork,
  deleteRemoteBranches,
  describeRemoteFailure,
  fetchTrunk,
  openRemote,
  pushBranches,
  pushLanding,
  readRemote,
  remoteAccess,
  type Remote,
  type RemoteAccess,
} from './remote.ts';
import { makeRepo, testGit, type TestRepo } from '../testing/repo.ts';
import { makeBareRemote, serveDaemon, serveHttp, type BareRemote } from '../testing/remote-server.ts';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const undo of cleanups.splice(0).reverse()) await undo();
});

const AUTH = { user: 'ada', password: 's3cret-pass' };

/** A home whose ~/.gitconfig names a credential store holding AUTH for `url` (and other keys tron must not take). */
async function homeWithCredentials(url: string): Promise<string> {
  const home = await mkdtemp(join(tmpdir(), 'tron-home-'));
  cleanups.push(() => rm(home, { recursive: true, force: true }));
  const store = join(home, '.git-credentials');
  const u = new URL(url);
  await writeFile(store, `http://${AUTH.user}:${AUTH.password}@${u.host}\n`, { mode: 0o600 });
  await writeFile(
    join(home, '.gitconfig'),
    `[credential]\n\thelper = store --file=${store}\n[core]\n\thooksPath = ${home}/hooks\n[alias]\n\tpush = !touch ${home}/alias-ran\n`,
  );
  return home;
}

type Kind = 'daemon' | 'http';

/**
 * A served bare remote holding trunk `main` with one commit, a clone of it (the user's
 * repository, remote `origin`), and the Remote tron opens on it.
 */
async function setup(kind: Kind, access?: RemoteAccess) {
  const bare = await makeBareRemote();
  cleanups.push(() => bare.cleanup());
  const served = kind === 'daemon' ? await serveDaemon(bare) : await serveHttp(bare, AUTH);
  cleanups.push(() => served.stop().catch(() => undefined));
  const seed = await makeRepo({ 'a.txt': 'a\n' });
  cleanups.push(() => seed.cleanup());
  await seed.git('push', '-q', bare.dir, 'main');
  const r = await makeRepo({});
  cleanups.push(() => r.cleanup());
  await r.git('remote', 'add', 'origin', served.url);
  await r.git('fetch', '-q', bare.dir, '+main:refs/remotes/origin/main');
  await r.git('reset', '-q', '--hard', 'origin/main');
  const theAccess =
    access ??
    (kind === 'http'
      ? await remoteAccess({ HOME: await homeWithCredentials(served.url), PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1' })
      : undefined);
  const remote = await openRemote(r.dir, { name: 'origin', trunk: 'main', timeoutMs: 30_000, ...(theAccess && { access: theAccess }) });
  return { bare, served, r, remote, base: await r.git('rev-parse', 'HEAD') };
}

/** Commits `count` files on top of HEAD in `r`, one commit each; their shas, oldest first. */
async function commits(r: TestRepo, names: string[]): Promise<string[]> {
  const shas: string[] = [];
  for (const name of names) {
    await r.write(`${name}.txt`, `${name}\n`);
    shas.push(await r.commitAll(name));
  }
  return shas;
}

/** Everything the bare remote holds: `<refname> <sha>` lines. */
const refsOf = (bare: BareRemote) => bare.git('for-each-ref', '--format=%(refname) %(objectname)');

/** A second clone (a teammate) that pushes one commit to the remote's trunk. */
async function teammatePushes(bare: BareRemote, file: string): Promise<string> {
  const mate = await makeRepo({});
  cleanups.push(() => mate.cleanup());
  await mate.git('fetch', '-q', bare.dir, '+main:refs/heads/theirs');
  await mate.git('reset', '-q', '--hard', 'theirs');
  await mate.write(file, 'theirs\n');
  const sha = await mate.commitAll(`teammate adds ${file}`);
  await mate.git('push', '-q', bare.dir, 'HEAD:main');
  return sha;
}

describe.each<Kind>(['daemon', 'http'])('a remote served by %s', (kind) => {
  it('lands a stack as one push: trunk moves to the top and every block gets its landed ref there', async () => {
    const { bare, r, remote, base } = await setup(kind);
    const [one, two] = await commits(r, ['one', 'two']);
    const pushed = await pushLanding(r.dir, remote, {
      expectedOld: base,
      top: two!,
      blocks: [
        { id: 'one', sha: one! },
        { id: 'two', sha: two! },
      ],
    });
    expect(pushed).toEqual({ ok: true });
    expect(await bare.git('rev-parse', 'main')).toBe(two);
    expect(await bare.git('rev-parse', 'refs/tron/landed/one')).toBe(one);
    expect(await bare.git('rev-parse', 'refs/tron/landed/two')).toBe(two);
    // Nothing local moved but the remote-tracking ref: the landed refs (and trunk) are the caller's, after the remote accepted.
    expect(await r.git('rev-parse', 'refs/remotes/origin/main')).toBe(two);
    expect(await r.git('for-each-ref', 'refs/tron/')).toBe('');
  });

  it('refuses by lease when a teammate pushed meanwhile, and leaves the teammate’s trunk as it is', async () => {
    const { bare, r, remote, base } = await setup(kind);
    const [one] = await commits(r, ['one']);
    const theirs = await teammatePushes(bare, 'theirs.txt');
    const before = await refsOf(bare);
    const pushed = await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] });
    expect(pushed).toMatchObject({ ok: false, kind: 'moved', refs: ['refs/heads/main'] });
    expect(await refsOf(bare)).toBe(before);
    expect(await bare.git('rev-parse', 'main')).toBe(theirs);
  });

  it('fetches the remote’s trunk into the repository and says where it is', async () => {
    const { bare, r, remote } = await setup(kind);
    const theirs = await teammatePushes(bare, 'theirs.txt');
    await rm(join(r.dir, '.git', 'FETCH_HEAD'), { force: true });
    expect(await fetchTrunk(r.dir, remote)).toEqual({ ok: true, sha: theirs });
    expect(await r.git('rev-parse', 'refs/remotes/origin/main')).toBe(theirs);
    expect(await r.git('cat-file', '-t', theirs)).toBe('commit');
    // No scratch ref or FETCH_HEAD of the fetch is left in the repository.
    expect(await r.git('for-each-ref', '--format=%(refname)')).not.toMatch(/tron-fetched|tron-have/);
    expect(existsSync(join(r.dir, '.git', 'FETCH_HEAD'))).toBe(false);
  });

  it("fetches trunk and every block's work in one round trip: the block's ref recorded, the others' commits in the store only", async () => {
    const { bare, r, remote } = await setup(kind);
    const theirs = await teammatePushes(bare, 'theirs.txt');
    const [alpha, beta] = await commits(r, ['alpha', 'beta']);
    await r.git('push', '-q', bare.dir, `${alpha}:refs/tron/work/alpha`, `${beta}:refs/tron/work/beta`);
    // A fresh clone of the remote's trunk, as an agent's is: it lacks both blocks' commits.
    const agent = await makeRepo({});
    cleanups.push(() => agent.cleanup());
    await agent.git('remote', 'add', 'origin', remote.fetchUrl);
    const work = { prefix: 'refs/tron/work/', block: 'alpha', into: 'refs/tron/fetched-work/alpha' };
    expect(await fetchTrunkAndWork(agent.dir, remote, work)).toEqual({ trunk: { ok: true, sha: theirs }, work: { ok: true, sha: alpha } });
    expect(await agent.git('rev-parse', 'refs/remotes/origin/main', 'refs/tron/fetched-work/alpha')).toBe(`${theirs}\n${alpha}`);
    expect(await agent.git('cat-file', '-t', beta!)).toBe('commit');
    expect(await agent.git('for-each-ref', '--format=%(refname)', 'refs/remotes', 'refs/tron', 'refs/tron-also')).toBe(
      'refs/remotes/origin/main\nrefs/tron/fetched-work/alpha',
    );
    // No work for the block yet: none said, trunk still fetched.
    expect(await fetchTrunkAndWork(agent.dir, remote, { ...work, block: 'gamma' })).toEqual({
      trunk: { ok: true, sha: theirs },
      work: { ok: true, sha: undefined },
    });
    // A remote without trunk yet: each fetched alone, trunk said missing, the work still there.
    await bare.git('update-ref', '-d', 'refs/heads/main');
    expect(await fetchTrunkAndWork(agent.dir, remote, work)).toEqual({
      trunk: { ok: true, sha: undefined },
      work: { ok: true, sha: alpha },
    });
  });

  it('reads the remote’s trunk, landed refs and tron branches in one listing', async () => {
    const { bare, r, remote, base } = await setup(kind);
    const [one] = await commits(r, ['one']);
    await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] });
    await pushBranches(r.dir, remote, [{ id: 'two', sha: one!, expected: undefined }]);
    const read = await readRemote(r.dir, remote);
    expect(read).toEqual({ ok: true, refs: { trunk: one, landed: new Map([['one', one]]), branches: new Map([['two', one]]) } });
    expect(await bare.git('rev-parse', 'refs/heads/tron/two')).toBe(one);
  });

  it('never lands a block twice: a landed ref that exists already refuses the whole push', async () => {
    const { bare, r, remote, base } = await setup(kind);
    const [one] = await commits(r, ['one']);
    await bare.git('update-ref', 'refs/tron/landed/one', base);
    const before = await refsOf(bare);
    const pushed = await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] });
    expect(pushed).toMatchObject({ ok: false, kind: 'moved', refs: ['refs/tron/landed/one'] });
    expect(await refsOf(bare)).toBe(before);
  });

  it('reports a declining pre-receive hook as a refusal, in the hook’s own words, with the remote unchanged', async () => {
    const { bare, r, remote, base } = await setup(kind);
    await bare.decline('trunk is frozen for the release (ask Ada)');
    const [one] = await commits(r, ['one']);
    const before = await refsOf(bare);
    const pushed = await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] });
    expect(pushed).toMatchObject({ ok: false, kind: 'refused', reason: 'hook' });
    if (pushed.ok || pushed.kind !== 'refused') throw new Error('not refused');
    expect(pushed.message).toContain('trunk is frozen for the release (ask Ada)');
    expect(describeRemoteFailure(remote, 'landing one', pushed)).toMatch(/^TRON_REMOTE_REJECTED: .*frozen for the release/s);
    expect(await refsOf(bare)).toBe(before);
  });

  it('finds a remote that is down unreachable (transient), and uses it once it is back', async () => {
    const { bare, served, r, remote, base } = await setup(kind);
    const [one] = await commits(r, ['one']);
    await served.stop();
    const down = await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] });
    expect(down).toMatchObject({ ok: false, kind: 'transient', reason: 'unreachable' });
    expect(await fetchTrunk(r.dir, remote)).toMatchObject({ ok: false, kind: 'transient' });
    await served.start();
    expect(await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] })).toEqual({ ok: true });
    expect(await bare.git('rev-parse', 'main')).toBe(one);
  });

  it('deletes only the tron branches whose lease holds', async () => {
    const { bare, r, remote, base } = await setup(kind);
    const [one] = await commits(r, ['one']);
    await pushBranches(r.dir, remote, [
      { id: 'a', sha: one!, expected: undefined },
      { id: 'b', sha: one!, expected: undefined },
    ]);
    // Someone moved tron/b meanwhile: its deletion is refused and it stays.
    await bare.git('update-ref', 'refs/heads/tron/b', base);
    expect(await deleteRemoteBranches(r.dir, remote, [{ id: 'a', expected: one! }])).toEqual({ ok: true });
    expect(await deleteRemoteBranches(r.dir, remote, [{ id: 'b', expected: one! }])).toMatchObject({ ok: false, kind: 'moved' });
    expect(await bare.git('for-each-ref', '--format=%(refname)', 'refs/heads/tron/')).toBe('refs/heads/tron/b');
  });
});

describe('credentials', () => {
  it('are refused over http without the user’s credential helper: an auth refusal, not a retry', async () => {
    const { r, remote, base, bare } = await setup('http', { config: [], env: {} });
    const [one] = await commits(r, ['one']);
    const before = await refsOf(bare);
    const pushed = await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] });
    expect(pushed).toMatchObject({ ok: false, kind: 'refused', reason: 'auth' });
    expect(await refsOf(bare)).toBe(before);
  });

  it('takes only the credential helper, the ssh agent and URL rewrites from the user’s config', async () => {
    const home = await homeWithCredentials('http://127.0.0.1:1/repo.git');
    await writeFile(
      join(home, '.gitconfig'),
      `[url "http://127.0.0.1:1/"]\n\tinsteadOf = team:\n[core]\n\tsshCommand = evil\n\tpager = evil\n[credential]\n\thelper = cache\n[protocol "ext"]\n\tallow = always\n`,
      { flag: 'a' },
    );
    const access = await remoteAccess({
      HOME: home,
      PATH: process.env.PATH,
      GIT_CONFIG_NOSYSTEM: '1',
      SSH_AUTH_SOCK: '/run/agent.sock',
      GITHUB_TOKEN: 'x',
    });
    expect(access.config.map(([key]) => key)).toEqual(['credential.helper', 'url.http://127.0.0.1:1/.insteadof', 'credential.helper']);
    expect(access.env).toEqual({ SSH_AUTH_SOCK: '/run/agent.sock' });
  });

  it('ignores what the repository’s own config says about credentials, URLs and programs', async () => {
    const { bare, served, r, remote, base } = await setup('http');
    const planted = join(r.dir, 'planted');
    // A worker without a sandbox could write these: a helper that steals, a rewrite that redirects, a proxy.
    await r.git('config', 'credential.helper', `!f() { touch ${planted}-helper; }; f`);
    await r.git('config', `url.http://127.0.0.1:9/.insteadOf`, served.url);
    await r.git('config', 'core.gitProxy', `!touch ${planted}-proxy`);
    await r.git('config', 'remote.origin.receivepack', `touch ${planted}-receivepack; git-receive-pack`);
    const [one] = await commits(r, ['one']);
    expect(await pushLanding(r.dir, remote, { expectedOld: base, top: one!, blocks: [{ id: 'one', sha: one! }] })).toEqual({ ok: true });
    expect(await bare.git('rev-parse', 'main')).toBe(one);
    for (const what of ['helper', 'proxy', 'receivepack']) expect(existsSync(`${planted}-${what}`), what).toBe(false);
  });

  it('uses the user’s URL rewrite to reach the remote', async () => {
    const bare = await makeBareRemote();
    cleanups.push(() => bare.cleanup());
    const served = await serveDaemon(bare);
    cleanups.push(() => served.stop());
    const home = await mkdtemp(join(tmpdir(), 'tron-home-'));
    cleanups.push(() => rm(home, { recursive: true, force: true }));
    await mkdir(home, { recursive: true });
    await writeFile(join(home, '.gitconfig'), `[url "git://127.0.0.1:${served.port}/"]\n\tinsteadOf = team:\n`);
    const r = await makeRepo({ 'a.txt': 'a\n' });
    cleanups.push(() => r.cleanup());
    await r.git('remote', 'add', 'origin', 'team:repo.git');
    const remote = await openRemote(r.dir, {
      name: 'origin',
      trunk: 'main',
      timeoutMs: 30_000,
      access: await remoteAccess({ HOME: home, PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1' }),
    });
    const head = await r.git('rev-parse', 'HEAD');
    expect(await pushLanding(r.dir, remote, { expectedOld: undefined, top: head, blocks: [{ id: 'first', sha: head }] })).toEqual({
      ok: true,
    });
    expect(await bare.git('rev-parse', 'main')).toBe(head);
  });
});

describe('timeouts and names', () => {
  it('kills a call the remote never answers and calls it transient', async () => {
    const held = new Set<Socket>();
    const silent = createServer((socket) => held.add(socket));
    await new Promise<void>((done) => silent.listen(0, '127.0.0.1', () => done()));
    cleanups.push(
      () =>
        new Promise<void>((done) => {
          for (const s of held) s.destroy();
          silent.close(() => done());
        }),
    );
    const port = (silent.address() as { port: number }).port;
    const r = await makeRepo({ 'a.txt': 'a\n' });
    cleanups.push(() => r.cleanup());
    await r.git('remote', 'add', 'origin', `git://127.0.0.1:${port}/repo.git`);
    const remote: Remote = await openRemote(r.dir, { name: 'origin', trunk: 'main', timeoutMs: 500 });
    expect(await fetchTrunk(r.dir, remote)).toMatchObject({ ok: false, kind: 'transient', reason: 'timeout' });
  });

  it('says which remote is missing when [remote] names one the repository does not have', async () => {
    const r = await makeRepo({});
    cleanups.push(() => r.cleanup());
    await expect(openRemote(r.dir, { name: 'upstream', trunk: 'main', timeoutMs: 1000 })).rejects.toMatchObject({
      code: 'TRON_REMOTE_UNKNOWN',
    });
  });

  it('calls a URL that names no repository a refusal, not a retry', async () => {
    const { served, r } = await setup('daemon');
    await testGit(r.dir, 'remote', 'set-url', 'origin', served.url.replace('repo.git', 'nothing.git'));
    const remote = await openRemote(r.dir, { name: 'origin', trunk: 'main', timeoutMs: 30_000 });
    expect(await fetchTrunk(r.dir, remote)).toMatchObject({ ok: false, kind: 'refused', reason: 'missing' });
  });
});
