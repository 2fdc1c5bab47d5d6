/** `[intake] source = "linear"` in .tron/config.toml: its defaults, what it asks for, and its key kept out of every list. */
import { describe, expect, it } from 'vitest';
import { parseConfig } from './config.ts';

const FILE = '.tron/config.toml';
const MINIMAL = `test = "npm test"
[workers.builder]
adapter = "command"
command = ["agent"]

[workers.reviewer]
adapter = "command"
command = ["agent"]
`;

describe('[intake] source = "linear"', () => {
  it('needs no [forge], reads the team by its key in upper case, and fills in Linear defaults', () => {
    const { config, problems } = parseConfig(`${MINIMAL}\n[intake]\nsource = "linear"\nteam = "eng"\n`, FILE);
    expect(problems).toEqual([]);
    expect(config?.forge).toBeUndefined();
    expect(config?.intake).toEqual({
      label: 'tron',
      pollMs: 60_000,
      linear: {
        team: 'ENG',
        tokenEnv: 'LINEAR_API_KEY',
        apiUrl: 'https://api.linear.app/graphql',
        timeoutMs: 30_000,
        retries: 6,
        backoffMs: 2_000,
      },
    });
    const full = `${MINIMAL}\n[intake]\nsource = "linear"\nteam = "OPS2"\nlabel = "agent"\nstate = "Todo"\ntoken_env = "OPS_LINEAR_KEY"\napi_url = "http://127.0.0.1:4000/graphql"\nretries = 2\n`;
    expect(parseConfig(full, FILE).config?.intake).toMatchObject({
      label: 'agent',
      linear: { team: 'OPS2', state: 'Todo', tokenEnv: 'OPS_LINEAR_KEY', apiUrl: 'http://127.0.0.1:4000/graphql', retries: 2 },
    });
  });

  it('keeps the forge as the default source, with no Linear settings', () => {
    const { config } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "acme/app"\n\n[intake]\n`, FILE);
    expect(config?.intake).toEqual({ label: 'tron', pollMs: 60_000 });
  });

  it('refuses Linear without a team, or with one that is not a team key (TRON_LINEAR_CONFIG)', () => {
    for (const team of ['', 'team = "E-NG"', 'team = "Engineering team"', 'team = "1ENG"']) {
      const { problems } = parseConfig(`${MINIMAL}\n[intake]\nsource = "linear"\n${team}\n`, FILE);
      expect(problems).toMatchObject([{ code: 'TRON_LINEAR_CONFIG', path: `${FILE}: intake.team` }]);
    }
  });

  it("refuses Linear's keys on the forge's intake instead of ignoring them (TRON_LINEAR_CONFIG)", () => {
    const { problems } = parseConfig(`${MINIMAL}\n[forge]\nrepo = "acme/app"\n\n[intake]\nteam = "ENG"\nstate = "Todo"\n`, FILE);
    expect(problems).toMatchObject([
      { code: 'TRON_LINEAR_CONFIG', path: `${FILE}: intake.team`, message: expect.stringContaining('source = "linear"') },
      { code: 'TRON_LINEAR_CONFIG', path: `${FILE}: intake.state` },
    ]);
  });

  it('still refuses the forge intake without a [forge], and an unknown source', () => {
    expect(parseConfig(`${MINIMAL}\n[intake]\n`, FILE).problems).toMatchObject([{ code: 'TRON_CONFIG_INVALID', path: `${FILE}: intake` }]);
    expect(parseConfig(`${MINIMAL}\n[intake]\nsource = "jira"\n`, FILE).problems).toMatchObject([
      { code: 'TRON_CONFIG_INVALID', path: expect.stringContaining('intake.source') },
    ]);
  });

  it("refuses handing Linear's API key to a test run or a worker (TRON_FORGE_TOKEN_EXPOSED)", () => {
    const toml = `test_env = ["LINEAR_API_KEY"]\n${MINIMAL.replace('command = ["agent"]\n', 'command = ["agent"]\nenv = ["OPS_KEY"]\n')}\n[intake]\nsource = "linear"\nteam = "ENG"\ntoken_env = "OPS_KEY"\n`;
    expect(parseConfig(toml, FILE).problems).toMatchObject([{ code: 'TRON_FORGE_TOKEN_EXPOSED', path: `${FILE}: workers.builder.env` }]);
    const byDefault = `test_env = ["LINEAR_API_KEY"]\n${MINIMAL}\n[intake]\nsource = "linear"\nteam = "ENG"\n`;
    expect(parseConfig(byDefault, FILE).problems).toMatchObject([{ code: 'TRON_FORGE_TOKEN_EXPOSED', path: `${FILE}: test_env` }]);
  });
});
