/**
 * A credential helper a worker planted in `~/.gitconfig` during a run is not run by the
 * next `tron start`'s remote calls (engine/runtime/access-changed.ts): the start refuses,
 * naming the file, until the user has looked (and touched it).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { InputError } from '../core/errors.ts';
import { openRemote, readRemote, remoteAccess } from '../git/remote.ts';
import { configFile, project, runTron } from '../testing/project.ts';
import { makeBareRemote, serveHttp } from '../testing/remote-server.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("the engine's git credential setup", () => {
  it('refuses a ~/.gitconfig changed while the previous run ran, so a helper a worker planted never gets the password', async () => {
    const bare = await makeBareRemote();
    const served = await serveHttp(bare, { user: 'ada', password: 'wire-pass' });
    cleanups.push(
      () => bare.cleanup(),
      () => served.stop(),
    );
    const home = mkdtempSync(join(tmpdir(), 'tron-home-'));
    cleanups.push(() => rmSync(home, { recursive: true, force: true }));
    const stolen = join(home, 'stolen');
    const gitconfig = join(home, '.gitconfig');
    const store = join(home, '.git-credentials');
    writeFileSync(store, `http://ada:wire-pass@127.0.0.1:${served.port}\n`);
    writeFileSync(gitconfig, `[credential]\n\thelper = store --file=${store}\n`);
    // The unsandboxed builder appends a helper that keeps whatever git hands it.
    const plant = `printf '[credential]\\n\\thelper = "!f() { cat >> ${stolen}; }; f"\\n' >> ${gitconfig}`;
    const repo = await project({
      blocks: { a: {} },
      config: configFile({ extra: '[sandbox]\nmode = "off"\n\n[remote]\nbackoff = "100ms"\nretries = 2\n' }),
      sim: `[[blocks.a.builder]]\nwrite = { "a.txt" = "a\\n" }\ncommit = "a"\nrun = ${JSON.stringify(plant)}\nreply = ">>DONE"\n`,
    });
    await repo.git('push', '-q', bare.dir, 'main');
    await repo.git('remote', 'add', 'origin', served.url);
    const env = { HOME: home, GIT_CONFIG_NOSYSTEM: '1' };

    const first = await runTron(repo, { env });
    expect(first.exit, first.output.join('\n')).toBe(0);
    expect(readFileSync(gitconfig, 'utf8')).toContain(stolen);
    // The run's own calls read the setup at its start: the planted helper was not in it.
    expect(existsSync(stolen)).toBe(false);

    const second = await runTron(repo, { env }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(second).toBeInstanceOf(InputError);
    const [problem] = (second as InputError).problems;
    expect(problem).toMatchObject({ code: 'TRON_GIT_CONFIG_CHANGED_IN_RUN', path: gitconfig });
    expect(existsSync(stolen)).toBe(false);

    // The user looked and keeps the change (touching the file): the start goes ahead.
    const now = new Date();
    utimesSync(gitconfig, now, now);
    const third = await runTron(repo, { env }).catch((err: unknown) => err);
    expect(third).not.toBeInstanceOf(InputError);
    // What the refusal kept from happening unasked: the engine's remote calls, with that setup, hand the helper the password.
    const remote = await openRemote(repo.dir, { name: 'origin', trunk: 'main', timeoutMs: 20_000, access: await remoteAccess(env) });
    expect((await readRemote(repo.dir, remote)).ok).toBe(true);
    expect(readFileSync(stolen, 'utf8')).toContain('password=wire-pass');
  });
});
