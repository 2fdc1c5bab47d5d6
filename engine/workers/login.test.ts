import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loginProblem } from './login.ts';
import { codexArgs } from './codex-config.ts';
import type { CommandSettings } from '../project/worker-settings.ts';

const homes: string[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});
function home(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-home-'));
  homes.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}
const claude: CommandSettings = {
  adapter: 'command',
  command: ['claude', '-p'],
  env: ['ANTHROPIC_*', 'CLAUDE_CODE_*', 'CLAUDE_CONFIG_DIR'],
  writable: [],
};
const codex: CommandSettings = { adapter: 'command', command: ['/opt/bin/codex', 'exec'], env: ['OPENAI_*', 'CODEX_HOME'], writable: [] };

describe('whether a CLI can authenticate', () => {
  it('refuses Claude Code with no key and no login, naming the variables, the file and how to log in', () => {
    const HOME = home();
    const problem = loginProblem(claude, { HOME }, 'linux');
    expect(problem).toContain('Claude Code ("claude") cannot authenticate');
    expect(problem).toContain('ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN');
    expect(problem).toContain('no login at ~/.claude/.credentials.json');
    expect(problem).toContain('/login');
  });

  it('accepts Claude Code with a key passed on, a login file, a key helper or a provider switch', () => {
    expect(loginProblem(claude, { HOME: home(), ANTHROPIC_API_KEY: 'k' }, 'linux')).toBeUndefined();
    expect(loginProblem(claude, { HOME: home({ '.claude/.credentials.json': '{}' }) }, 'linux')).toBeUndefined();
    expect(loginProblem(claude, { HOME: home({ '.claude/settings.json': '{"apiKeyHelper":"pass show k"}' }) }, 'linux')).toBeUndefined();
    expect(loginProblem(claude, { HOME: home(), CLAUDE_CODE_USE_BEDROCK: '1' }, 'linux')).toBeUndefined();
  });

  it('looks for the login where CLAUDE_CONFIG_DIR says, when the worker gets it', () => {
    const HOME = home({ 'elsewhere/.credentials.json': '{}' });
    expect(loginProblem(claude, { HOME, CLAUDE_CONFIG_DIR: join(HOME, 'elsewhere') }, 'linux')).toBeUndefined();
    expect(loginProblem({ ...claude, env: [] }, { HOME, CLAUDE_CONFIG_DIR: join(HOME, 'elsewhere') }, 'linux')).toBeDefined();
  });

  it('says when the key is set but the env list keeps it from the worker', () => {
    const problem = loginProblem({ ...claude, env: [] }, { HOME: home(), ANTHROPIC_API_KEY: 'k' }, 'linux');
    expect(problem).toContain("ANTHROPIC_API_KEY is set, but the worker's env list does not pass it on: add it to env");
  });

  it('does not judge a Claude Code login kept in the macOS Keychain', () => {
    expect(loginProblem(claude, { HOME: home() }, 'darwin')).toBeUndefined();
  });

  it('finds the Codex login in $CODEX_HOME/auth.json, default ~/.codex', () => {
    const HOME = home({ '.codex/auth.json': '{}', 'ch/auth.json': '{}' });
    expect(loginProblem(codex, { HOME }, 'linux')).toBeUndefined();
    expect(loginProblem(codex, { HOME, CODEX_HOME: join(HOME, 'ch') }, 'linux')).toBeUndefined();
    const problem = loginProblem(codex, { HOME: home() }, 'linux');
    expect(problem).toContain('Codex ("/opt/bin/codex") cannot authenticate');
    expect(problem).toContain('codex login');
    expect(problem).toContain('~/.codex/auth.json');
    expect(loginProblem(codex, { HOME: home(), OPENAI_API_KEY: 'k' }, 'linux')).toBeUndefined();
  });

  it('has nothing to say about a CLI it does not know', () => {
    expect(loginProblem({ adapter: 'command', command: ['my-agent'], env: [], writable: [] }, { HOME: home() }, 'linux')).toBeUndefined();
  });

  it('accepts Claude Code authenticated by its settings: an env table with a token, a key helper in the project, --settings, a primaryApiKey', () => {
    const repo = home();
    expect(
      loginProblem(claude, { HOME: home({ '.claude/settings.json': '{"env":{"ANTHROPIC_AUTH_TOKEN":"t"}}' }) }, 'linux', repo),
    ).toBeUndefined();
    expect(
      loginProblem(claude, { HOME: home({ '.claude/settings.json': '{"env":{"CLAUDE_CODE_USE_VERTEX":"1"}}' }) }, 'linux', repo),
    ).toBeUndefined();
    expect(loginProblem(claude, { HOME: home() }, 'linux', home({ '.claude/settings.json': '{"apiKeyHelper":"echo k"}' }))).toBeUndefined();
    expect(
      loginProblem(claude, { HOME: home() }, 'linux', home({ '.claude/settings.local.json': '{"env":{"ANTHROPIC_API_KEY":"k"}}' })),
    ).toBeUndefined();
    const flagged = { ...claude, command: ['claude', '-p', '--settings', '{"env":{"ANTHROPIC_AUTH_TOKEN":"t"}}'] };
    expect(loginProblem(flagged, { HOME: home() }, 'linux', repo)).toBeUndefined();
    const file = home({ 's.json': '{"apiKeyHelper":"pass show k"}' });
    expect(
      loginProblem({ ...claude, command: ['claude', `--settings=${join(file, 's.json')}`] }, { HOME: home() }, 'linux', repo),
    ).toBeUndefined();
    expect(loginProblem(claude, { HOME: home({ '.claude.json': '{"primaryApiKey":"k"}' }) }, 'linux', repo)).toBeUndefined();
    const dir = home({ '.claude.json': '{"primaryApiKey":"k"}' });
    expect(loginProblem(claude, { HOME: home(), CLAUDE_CONFIG_DIR: dir }, 'linux', repo)).toBeUndefined();
  });

  it('still refuses Claude Code whose settings name no key: an empty env table, a model only, a helper-less --settings', () => {
    const repo = home();
    expect(loginProblem(claude, { HOME: home({ '.claude/settings.json': '{"env":{"ANTHROPIC_MODEL":"m"}}' }) }, 'linux', repo)).toContain(
      'cannot authenticate',
    );
    expect(loginProblem({ ...claude, command: ['claude', '--settings', '{"model":"x"}'] }, { HOME: home() }, 'linux', repo)).toContain(
      'cannot authenticate',
    );
    // ~/.claude.json is not read when CLAUDE_CONFIG_DIR points elsewhere, as Claude Code does.
    const HOME = home({ '.claude.json': '{"primaryApiKey":"k"}' });
    expect(loginProblem(claude, { HOME, CLAUDE_CONFIG_DIR: join(HOME, 'other') }, 'linux', repo)).toContain('cannot authenticate');
  });
});

/** A Codex config.toml for a provider of one's own, as Codex's docs show it. */
const PROVIDER = `model = "gpt-oss-20b"
model_provider = "fake"

[model_providers.fake]
name = "A local server"
base_url = "http://127.0.0.1:11434/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
`;

/** The codex worker with the provider's key variable in its env list, as a user sets it up. */
const passing: CommandSettings = { ...codex, env: [...codex.env, 'FAKE_API_KEY'] };

describe('Codex with a model provider of its own', () => {
  it('accepts a provider whose env_key is set and passed by the env list, with no OpenAI key and no login', () => {
    const HOME = home({ '.codex/config.toml': PROVIDER });
    expect(loginProblem(passing, { HOME, FAKE_API_KEY: 'k' }, 'linux')).toBeUndefined();
  });

  it('refuses a provider whose env_key is set but kept from the worker by its env list, saying to add it', () => {
    // tron never passes a variable because ~/.codex/config.toml, which a worker can write, names it.
    const HOME = home({ '.codex/config.toml': PROVIDER });
    const problem = loginProblem(codex, { HOME, FAKE_API_KEY: 'k' }, 'linux');
    expect(problem).toContain("whose env_key is FAKE_API_KEY: FAKE_API_KEY is set, but the worker's env list does not pass it on");
    expect(problem).toContain('Add "FAKE_API_KEY" to env');
  });

  it('refuses a provider whose env_key is unset, naming the variable, the provider and the config, and not the OpenAI login', () => {
    const HOME = home({ '.codex/config.toml': PROVIDER });
    const problem = loginProblem(codex, { HOME, OPENAI_API_KEY: 'k' }, 'linux');
    expect(problem).toContain('uses the model provider "fake" (~/.codex/config.toml), whose env_key is FAKE_API_KEY');
    expect(problem).toContain('Export FAKE_API_KEY and add "FAKE_API_KEY" to env');
    expect(problem).not.toContain('codex login');
    // Empty counts as unset, as Codex says "Missing environment variable" for it too.
    expect(loginProblem(passing, { HOME, FAKE_API_KEY: ' ' }, 'linux')).toContain('FAKE_API_KEY is set neither');
  });

  it('accepts a provider with no env_key, with a bearer token or an auth command, a local server, and a key in $CODEX_HOME/.env', () => {
    const noKey = PROVIDER.replace('env_key = "FAKE_API_KEY"\n', '');
    expect(loginProblem(codex, { HOME: home({ '.codex/config.toml': noKey }) }, 'linux')).toBeUndefined();
    const bearer = noKey.replace('wire_api', 'experimental_bearer_token = "t"\nwire_api');
    expect(loginProblem(codex, { HOME: home({ '.codex/config.toml': bearer }) }, 'linux')).toBeUndefined();
    const command = `${noKey}\n[model_providers.fake.auth]\ncommand = "gcloud"\nargs = ["auth", "print-access-token"]\n`;
    expect(loginProblem(codex, { HOME: home({ '.codex/config.toml': command }) }, 'linux')).toBeUndefined();
    expect(loginProblem(codex, { HOME: home({ '.codex/config.toml': 'model_provider = "ollama"\n' }) }, 'linux')).toBeUndefined();
    expect(loginProblem({ ...codex, command: ['codex', 'exec', '--oss', '-'] }, { HOME: home() }, 'linux')).toBeUndefined();
    const HOME = home({ '.codex/config.toml': PROVIDER, '.codex/.env': '# keys\nFAKE_API_KEY="from-dotenv"\n' });
    expect(loginProblem(codex, { HOME }, 'linux')).toBeUndefined();
    expect(loginProblem(codex, { HOME: home({ '.codex/.env': 'export OPENAI_API_KEY=k\n' }) }, 'linux')).toBeUndefined();
  });

  it('reads the config under $CODEX_HOME when the worker gets it, and ignores it when the env list keeps it back', () => {
    const HOME = home({ 'ch/config.toml': PROVIDER });
    const CODEX_HOME = join(HOME, 'ch');
    expect(loginProblem(codex, { HOME, CODEX_HOME }, 'linux')).toContain('whose env_key is FAKE_API_KEY');
    expect(loginProblem({ ...codex, env: [] }, { HOME, CODEX_HOME }, 'linux')).toContain(
      'none of OPENAI_API_KEY, CODEX_API_KEY reaches it',
    );
  });

  it('follows the argv: -c model_provider=…, -c on a provider key, and --profile layering NAME.config.toml', () => {
    const table = PROVIDER.replace('model_provider = "fake"\n', '');
    const HOME = home({ '.codex/config.toml': table, '.codex/work.config.toml': 'model_provider = "fake"\n' });
    const withArgs = (...args: string[]) => ({ ...passing, command: ['codex', 'exec', ...args, '-'], env: [...passing.env, 'OTHER'] });
    // Without the switch, Codex uses OpenAI: its login is what counts.
    expect(loginProblem(withArgs(), { HOME }, 'linux')).toContain('none of OPENAI_API_KEY, CODEX_API_KEY reaches it');
    expect(loginProblem(withArgs('-c', 'model_provider=fake'), { HOME }, 'linux')).toContain(
      'uses the model provider "fake" (-c model_provider=fake in command)',
    );
    expect(loginProblem(withArgs('--config=model_provider="fake"'), { HOME, FAKE_API_KEY: 'k' }, 'linux')).toBeUndefined();
    expect(
      loginProblem(
        withArgs('-c', 'model_provider=fake', '-c', 'model_providers.fake.env_key="OTHER"'),
        { HOME, FAKE_API_KEY: 'k' },
        'linux',
      ),
    ).toContain('whose env_key is OTHER');
    expect(loginProblem(withArgs('-p', 'work'), { HOME }, 'linux')).toContain(`(~/.codex/work.config.toml), whose env_key is FAKE_API_KEY`);
    expect(loginProblem(withArgs('--profile', 'work'), { HOME, FAKE_API_KEY: 'k' }, 'linux')).toBeUndefined();
  });

  it('leaves a config Codex refuses itself to Codex: bad TOML, an unknown provider', () => {
    expect(loginProblem(codex, { HOME: home({ '.codex/config.toml': 'model_provider = \n' }) }, 'linux')).toBeUndefined();
    expect(loginProblem(codex, { HOME: home({ '.codex/config.toml': 'model_provider = "nowhere"\n' }) }, 'linux')).toBeUndefined();
  });

  it('reads -c, --config, -p and --profile in their separate and joined forms', () => {
    expect(
      codexArgs([
        'codex',
        '-c',
        'a=1',
        '--config',
        'b=2',
        '--config=c=3',
        '-cd=4',
        '-p',
        'x',
        'exec',
        '--oss',
        '--local-provider',
        'lmstudio',
      ]),
    ).toEqual({
      overrides: ['a=1', 'b=2', 'c=3', 'd=4'],
      profile: 'x',
      oss: true,
      localProvider: 'lmstudio',
    });
  });
});
