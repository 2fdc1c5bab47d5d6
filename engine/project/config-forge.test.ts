/** `[forge]` and `[intake]` in .tron/config.toml: defaults, refusals, and the token kept out of every list. */
import { describe, expect, it } from 'vitest';
import { parseConfig } from './config.ts';

const FILE = '.tron/config.toml';
const MINIMAL = `test = "npm test"
[workers.builder]
adapter = "command"
command = ["agent"]
env = ["ANTHROPIC_API_KEY"]

[workers.reviewer]
adapter = "command"
command = ["agent"]
`;

describe('[forge] and [intake]', () => {
  it('has no forge unless [forge] is there, and fills in its defaults when it is', () => {
    expect(parseConfig(MINIMAL, FILE).config?.forge).toBeUndefined();
    expect(parseConfig(`${MINIMAL}\n[forge]\nrepo = "acme/app"\n\n[intake]\n`, FILE).config).toMatchObject({
      forge: {
        kind: 'github',
        repo: 'acme/app',
        tokenEnv: 'GITHUB_TOKEN',
        apiUrl: 'https://api.github.com',
        land: 'push',
        merge: 'push',
        webhookSecretEnv: 'TRON_WEBHOOK_SECRET',
        requireHumanApproval: false,
        timeoutMs: 30_000,
        retries: 6,
        backoffMs: 2_000,
      },
      intake: { label: 'tron', pollMs: 60_000 },
    });
    const ghe = `${MINIMAL}\n[forge]\nrepo = "a/b"\napi_url = "https://ghe.example/api/v3/"\nland = "pr"\nrequired_checks = ["ci"]\nrequire_human_approval = true\ntoken_env = "GHE_TOKEN"\n\n[remote]\n`;
    expect(parseConfig(ghe, FILE).config?.forge).toMatchObject({
      apiUrl: 'https://ghe.example/api/v3',
      land: 'pr',
      requiredChecks: [{ name: 'ci' }],
      requireHumanApproval: true,
      tokenEnv: 'GHE_TOKEN',
      trusted: 'write',
    });
  });

  it('reads whom to trust and the app each required check must come from', () => {
    const toml = `${MINIMAL}\n[forge]\nrepo = "a/b"\nland = "pr"\ntrusted = ["ada", "ci-bot[bot]"]\nrequired_checks = ["lint", { name = "ci/test", app = "github-actions" }, { name = "e2e", app = 15368 }]\n\n[remote]\n`;
    expect(parseConfig(toml, FILE).config?.forge).toMatchObject({
      trusted: ['ada', 'ci-bot[bot]'],
      requiredChecks: [{ name: 'lint' }, { name: 'ci/test', app: 'github-actions' }, { name: 'e2e', app: 15368 }],
    });
    expect(parseConfig(`${MINIMAL}\n[forge]\nrepo = "a/b"\ntrusted = "maintain"\n`, FILE).config?.forge?.trusted).toBe('maintain');
  });

  it('refuses a trusted that is neither a role tron knows nor a list of logins, and a required check with an unknown key', () => {
    for (const bad of ['"everyone"', '[]', '["not a login"]']) {
      const { problems } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "a/b"\ntrusted = ${bad}\n`, FILE);
      expect(problems).toMatchObject([{ code: 'TRON_CONFIG_INVALID', path: expect.stringMatching(/: forge\.trusted(\[0\])?$/) }]);
    }
    const { problems } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "a/b"\nrequired_checks = [{ name = "ci", ap = 1 }]\n`, FILE);
    expect(problems.map((p) => p.code)).toHaveLength(1);
    expect(problems[0]!.path).toContain('forge.required_checks');
  });

  it('refuses a repo that is not owner/name, an unknown land mode and an unknown key, each at its key', () => {
    const { problems } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "app"\nland = "merge"\ntoken = "ghp_x"\n`, FILE);
    expect(problems.map((p) => [p.code, p.path])).toEqual(
      expect.arrayContaining([
        ['TRON_CONFIG_INVALID', `${FILE}: forge.repo`],
        ['TRON_CONFIG_INVALID', `${FILE}: forge.land`],
        ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: forge.token`],
      ]),
    );
  });

  it("takes a GitLab project by its path or numeric id, with GitLab's token variable and gitlab.com's API by default", () => {
    expect(parseConfig(`${MINIMAL}\n[forge]\nkind = "gitlab"\nrepo = "acme/platform/app"\n`, FILE).config?.forge).toMatchObject({
      kind: 'gitlab',
      repo: 'acme/platform/app',
      tokenEnv: 'GITLAB_TOKEN',
      apiUrl: 'https://gitlab.com/api/v4',
    });
    const own = `${MINIMAL}\n[forge]\nkind = "gitlab"\nrepo = "4711"\napi_url = "https://gitlab.example.com/api/v4/"\ntoken_env = "GL_TOKEN"\n`;
    expect(parseConfig(own, FILE).config?.forge).toMatchObject({
      repo: '4711',
      tokenEnv: 'GL_TOKEN',
      apiUrl: 'https://gitlab.example.com/api/v4',
    });
  });

  it('refuses a GitLab api_url that is not http(s) or does not end in /api/v4, naming the key and the fix', () => {
    for (const bad of ['https://gitlab.example.com', 'https://gitlab.example.com/api/v3', 'ftp://gitlab.example.com/api/v4']) {
      const { problems } = parseConfig(`${MINIMAL}\n[forge]\nkind = "gitlab"\nrepo = "a/b"\napi_url = "${bad}"\n`, FILE);
      expect(problems, bad).toMatchObject([{ code: 'TRON_CONFIG_INVALID', path: `${FILE}: forge.api_url` }]);
      expect(problems[0]!.message).toMatch(/\/api\/v4/);
    }
  });

  it('refuses a group path or a project id for GitHub, and keeps the GitHub token for GitHub and the GitLab one out of workers', () => {
    for (const repo of ['acme/platform/app', '4711']) {
      const { problems } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "${repo}"\n`, FILE);
      expect(problems, repo).toMatchObject([{ code: 'TRON_CONFIG_INVALID', path: `${FILE}: forge.repo` }]);
      expect(problems[0]!.message).toContain('owner/name');
    }
    const text = MINIMAL.replace('env = ["ANTHROPIC_API_KEY"]', 'env = ["ANTHROPIC_API_KEY", "GITLAB_TOKEN"]');
    const { problems } = parseConfig(`${text}\n[forge]\nkind = "gitlab"\nrepo = "a/b"\n`, FILE);
    expect(problems.map((p) => [p.code, p.path])).toEqual([['TRON_FORGE_TOKEN_EXPOSED', `${FILE}: workers.builder.env`]]);
  });

  it('refuses land = "pr" without a [remote] to push the branches to', () => {
    const { problems } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "a/b"\nland = "pr"\n`, FILE);
    expect(problems).toMatchObject([{ code: 'TRON_CONFIG_INVALID', path: `${FILE}: forge.land` }]);
  });

  it('refuses [intake] without a forge to read issues from', () => {
    const { problems } = parseConfig(`${MINIMAL}\n[intake]\nlabel = "tron"\n`, FILE);
    expect(problems).toMatchObject([{ code: 'TRON_CONFIG_INVALID', path: `${FILE}: intake` }]);
  });

  it("refuses to hand the forge's token to a test run or a worker", () => {
    const text = MINIMAL.replace('env = ["ANTHROPIC_API_KEY"]', 'env = ["ANTHROPIC_API_KEY", "GHE_TOKEN"]');
    const { problems } = parseConfig(`test_env = ["TRON_FORGE_TOKEN"]\n${text}\n[forge]\nrepo = "a/b"\ntoken_env = "GHE_TOKEN"\n`, FILE);
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_FORGE_TOKEN_EXPOSED', `${FILE}: test_env`],
      ['TRON_FORGE_TOKEN_EXPOSED', `${FILE}: workers.builder.env`],
    ]);
  });

  it('refuses merge = "queue" outside PR mode, at its key', () => {
    const { problems } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "a/b"\nmerge = "queue"\n`, FILE);
    expect(problems).toMatchObject([{ code: 'TRON_CONFIG_INVALID', path: `${FILE}: forge.merge` }]);
    expect(parseConfig(`${MINIMAL}\n[forge]\nrepo = "a/b"\nland = "pr"\nmerge = "queue"\n\n[remote]\n`, FILE).config?.forge?.merge).toBe(
      'queue',
    );
  });

  it('refuses to hand the webhook secret to a worker either, by its configured name or the default one', () => {
    const text = MINIMAL.replace('env = ["ANTHROPIC_API_KEY"]', 'env = ["ANTHROPIC_API_KEY", "HOOK_SECRET"]');
    const { problems } = parseConfig(
      `test_env = ["TRON_WEBHOOK_SECRET"]\n${text}\n[forge]\nrepo = "a/b"\nwebhook_secret_env = "HOOK_SECRET"\n`,
      FILE,
    );
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_FORGE_TOKEN_EXPOSED', `${FILE}: test_env`],
      ['TRON_FORGE_TOKEN_EXPOSED', `${FILE}: workers.builder.env`],
    ]);
  });
});
