import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../project/config.ts';
import { loadProject } from '../project/register.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { PRESET_NAMES } from '../workers/presets.ts';
import { DEFAULT_PRESET, guessTestCommand, initCommand } from './init.ts';
import { snapshot } from '../testing/snapshot.ts';
import { loadSimScript, scriptFor } from '../workers/sim.ts';

describe('tron init', () => {
  let repo: TestRepo | undefined;
  let scratch = '';
  afterEach(async () => {
    await repo?.cleanup();
    repo = undefined;
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    scratch = '';
  });

  async function init(worker?: (typeof PRESET_NAMES)[number], dir = repo!.dir): Promise<{ code: number; lines: string[] }> {
    const lines: string[] = [];
    const code = await initCommand({ repo: dir, ...(worker && { worker }), print: (line) => lines.push(line) });
    return { code, lines };
  }

  it.each(PRESET_NAMES)('writes a config with the %s preset that loads without problems', async (preset) => {
    repo = await makeRepo({ 'package.json': '{}\n' });
    const { code } = await init(preset);
    expect(code).toBe(0);
    const { config, problems } = loadConfig(repo.dir);
    expect(problems).toEqual([]);
    const adapter = preset === 'claude' || preset === 'codex' ? 'command' : preset;
    expect(config!.workers.builder.adapter).toBe(adapter);
    expect(config!.workers.architect?.adapter).toBe(adapter);
    const project = loadProject(repo.dir);
    expect(project.blocks.map((b) => b.id)).toEqual(['example']);
    expect(project.blocks[0]!.criteria.length).toBeGreaterThan(0);
  });

  it('defaults to the openai preset and comments every field', async () => {
    repo = await makeRepo({ 'package.json': '{}\n' });
    expect((await init()).code).toBe(0);
    expect(DEFAULT_PRESET).toBe('openai');
    expect(loadConfig(repo.dir).config!.workers.builder.adapter).toBe('openai');
    const text = await repo.read('.tron/config.toml');
    expect(text).toMatch(/# Run whenever the operator is paged, with the page as one JSON object on stdin\n.*\n# page_command = \[/);
    for (const key of [
      'trunk',
      'max_parallel',
      'test',
      'test_env',
      'turn',
      'mode',
      'test_network',
      'probe_wait',
      'extension',
      'max_extensions',
      'reissues',
    ]) {
      const line = text.split('\n').find((l) => new RegExp(`^#? ?${key} = `).test(l));
      expect(line, key).toMatch(/ # \S/);
    }
    expect(text).toMatch(/without it, troubles that would consult the\n# architect .* go straight to\n# the operator/);
  });

  it('ignores what the engine writes at run time', async () => {
    repo = await makeRepo({});
    await init('sim');
    expect((await repo.read('.tron/.gitignore')).split('\n')).toEqual(['runs/', 'worktrees/', 'inbox/', 'sim-state/', 'engine.lock', '']);
  });

  it('keeps an existing .tron/.gitignore and adds only the missing lines', async () => {
    repo = await makeRepo({ '.tron/.gitignore': 'runs/\nscratch/' });
    const { code, lines } = await init('sim');
    expect(code).toBe(0);
    expect(await repo.read('.tron/.gitignore')).toBe('runs/\nscratch/\nworktrees/\ninbox/\nsim-state/\nengine.lock\n');
    expect(lines).toContain('added worktrees/, inbox/, sim-state/, engine.lock to .tron/.gitignore');
  });

  it('prints what it created and the command to run next', async () => {
    repo = await makeRepo({});
    const { lines } = await init('sim');
    const out = lines.join('\n');
    expect(out).toMatch(/created \.tron\/config\.toml/);
    expect(out).toMatch(/created \.tron\/blocks\/example\.md/);
    expect(out).toMatch(/created \.tron\/\.gitignore/);
    expect(lines.at(-1)).toBe(`  tron start --repo ${repo.dir}`);
  });

  it('uses the current branch as trunk and guesses the test command from the project files', async () => {
    repo = await makeRepo({ 'Cargo.toml': '[package]\n' }, { trunk: 'develop' });
    await init('sim');
    expect(loadConfig(repo.dir).config).toMatchObject({ trunk: 'develop', test: 'cargo test' });
  });

  it('guesses the test command from package.json, Cargo.toml, go.mod, pyproject.toml or a Makefile, and nothing from other files', () => {
    expect(guessTestCommand(['package.json', 'Makefile'])).toBe('npm test');
    expect(guessTestCommand(['go.mod'])).toBe('go test ./...');
    expect(guessTestCommand(['pyproject.toml'])).toBe('python -m pytest');
    expect(guessTestCommand(['Makefile'])).toBe('make test');
    expect(guessTestCommand(['README.md'])).toBeUndefined();
  });

  it('writes a commented placeholder for the test command when no project file gives it away, which tron start refuses by name', async () => {
    repo = await makeRepo({ 'README.md': '# notes\n' });
    const { code, lines } = await init('sim');
    expect(code).toBe(0);
    const text = await repo.read('.tron/config.toml');
    expect(text.slice(0, text.indexOf('[timeouts]'))).not.toMatch(/^test = /m);
    expect(text).toMatch(/^# test = "…" +# REQUIRED: tron init found none of package\.json, .*Makefile/m);
    expect(lines.join('\n')).toContain('no test command: set test');
    expect(lines).toContain(
      'warning: no package.json, Cargo.toml, go.mod, pyproject.toml, setup.py, Makefile here to tell the test command; set test in .tron/config.toml before tron start',
    );
    const { problems } = loadConfig(repo.dir);
    expect(problems).toEqual([expect.objectContaining({ code: 'TRON_CONFIG_REQUIRED', path: '.tron/config.toml: test' })]);
    expect(problems[0]!.message).toMatch(/e\.g\. test = "npm test"/);
    expect(await repo.read('.tron/blocks/example.md')).toContain('"that section gives the exact command that runs the suite"');
  });

  it.each(['claude', 'codex'] as const)('warns, with the install command, when %s is not on PATH', async (preset) => {
    repo = await makeRepo({ 'package.json': '{}\n' });
    const lines: string[] = [];
    const code = await initCommand({ repo: repo.dir, worker: preset, print: (l) => lines.push(l), env: { PATH: '/nonexistent' } });
    expect(code).toBe(0);
    const pkg = preset === 'claude' ? '@anthropic-ai/claude-code' : '@openai/codex';
    expect(lines).toContain(
      `warning: "${preset}" is not on PATH; tron start will refuse to run until it is: npm install -g ${pkg}, then log in`,
    );
    const quiet: string[] = [];
    await repo.cleanup();
    repo = await makeRepo({ 'package.json': '{}\n', 'bin/claude': '', 'bin/codex': '' });
    for (const p of ['claude', 'codex']) chmodSync(path.join(repo.dir, 'bin', p), 0o755);
    await initCommand({ repo: repo.dir, worker: preset, print: (l) => quiet.push(l), env: { PATH: path.join(repo.dir, 'bin') } });
    expect(quiet.join('\n')).not.toContain('warning');
  });

  it('writes a sim script with the example block and a default that every other block plays', async () => {
    repo = await makeRepo({ 'package.json': '{}\n' });
    const { lines } = await init('sim');
    expect(lines.join('\n')).toContain('created .tron/sim.toml');
    const script = loadSimScript(path.join(repo.dir, '.tron/sim.toml'));
    expect(Object.keys(script.blocks).sort()).toEqual(['*', 'example']);
    expect(scriptFor(script, 'login', 'builder')).toEqual([
      expect.objectContaining({
        write: { 'sim-work/login.md': expect.stringContaining('# login\n') },
        commit: "login: the sim builder's stand-in work",
      }),
    ]);
    expect(scriptFor(script, 'example', 'builder')[0]!.append!['README.md']).toContain('## Running the tests');
    expect(loadConfig(repo.dir).config!.workers.reviewer).toMatchObject({ adapter: 'sim', script: '.tron/sim.toml' });
  });

  it.each(['.tron/config.toml', '.tron/blocks/keep.md'])('refuses and changes nothing when %s exists', async (file) => {
    repo = await makeRepo({ [file]: 'mine\n' });
    const before = snapshot(repo.dir);
    const { code, lines } = await init('sim');
    expect(code).toBe(2);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(`^TRON_INIT_EXISTS: ${path.dirname(file) === '.tron' ? '\\.tron/config\\.toml' : '\\.tron/blocks'}: `),
    );
    expect(snapshot(repo.dir)).toEqual(before);
  });

  it('refuses a folder that is not a git repository', async () => {
    scratch = mkdtempSync(path.join(tmpdir(), 'tron-init-'));
    const { code, lines } = await init('sim', scratch);
    expect(code).toBe(2);
    expect(lines[0]).toMatch(/^TRON_NOT_A_REPO: /);
    expect(readdirSync(scratch)).toEqual([]);
  });

  it('refuses a folder that does not exist', async () => {
    scratch = mkdtempSync(path.join(tmpdir(), 'tron-init-'));
    const { code, lines } = await init('sim', path.join(scratch, 'missing'));
    expect(code).toBe(2);
    expect(lines[0]).toMatch(/^TRON_NOT_A_REPO: .*no such directory/);
    expect(existsSync(path.join(scratch, 'missing'))).toBe(false);
  });

  it('refuses a subfolder of a repository and names its top', async () => {
    repo = await makeRepo({ 'sub/file.txt': 'x\n' });
    const { code, lines } = await init('sim', path.join(repo.dir, 'sub'));
    expect(code).toBe(2);
    expect(lines[0]).toMatch(/^TRON_NOT_A_REPO: /);
    expect(lines[0]).toContain(`tron init --repo ${repo.dir}`);
    expect(existsSync(path.join(repo.dir, 'sub/.tron'))).toBe(false);
  });

  it('refuses an unknown worker preset', async () => {
    repo = await makeRepo({});
    const lines: string[] = [];
    const code = await initCommand({ repo: repo.dir, worker: 'gpt' as never, print: (l) => lines.push(l) });
    expect(code).toBe(2);
    expect(lines[0]).toMatch(/^TRON_INIT_WORKER: --worker: "gpt" is not a worker preset; use one of openai, claude, codex, sim/);
    expect(existsSync(path.join(repo.dir, '.tron'))).toBe(false);
  });

  it('fills an existing .tron folder without touching what is already there', async () => {
    repo = await makeRepo({});
    mkdirSync(path.join(repo.dir, '.tron'));
    writeFileSync(path.join(repo.dir, '.tron/notes'), 'kept\n');
    expect((await init('sim')).code).toBe(0);
    expect(readdirSync(path.join(repo.dir, '.tron')).sort()).toEqual(['.gitignore', 'blocks', 'config.toml', 'notes', 'sim.toml']);
    expect(readdirSync(path.join(repo.dir, '.tron/blocks'))).toEqual(['example.md']);
  });
});
