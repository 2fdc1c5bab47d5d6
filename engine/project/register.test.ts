import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { InputError, type Problem } from '../core/errors.ts';
import { byPriority, checkRegister, loadProject, loadRegister, parseBlockFile, type Block } from './register.ts';
import { snapshot } from '../testing/snapshot.ts';

const CONFIG = `test = "npm test"
[workers.builder]
adapter = "sim"
[workers.reviewer]
adapter = "sim"
`;

function blockText(fields: string, brief = 'Do the thing.\n'): string {
  return `+++\n${fields}\n+++\n${brief}`;
}

const LOGIN = blockText(
  `title = "Add a login endpoint"
depends_on = ["user-model"]
priority = 1
criteria = [
  "POST /login returns a token for valid credentials",
  "invalid credentials get 401",
]`,
  'Free-form brief for the builder.\n\nSecond paragraph.\n',
);

function only(text: string, file = '.tron/blocks/a.md'): Problem {
  const { block, problems } = parseBlockFile(text, file);
  expect(block).toBeUndefined();
  expect(problems).toHaveLength(1);
  return problems[0]!;
}

function block(id: string, dependsOn: string[] = []): Block {
  return { id, title: id, dependsOn, priority: 0, criteria: ['c'], brief: '', file: `.tron/blocks/${id}.md`, digest: '' };
}

describe('parseBlockFile', () => {
  it('reads the id from the file name and every field from the front matter', () => {
    const { block, problems } = parseBlockFile(LOGIN, '.tron/blocks/login.md');
    expect(problems).toEqual([]);
    expect(block).toEqual({
      id: 'login',
      title: 'Add a login endpoint',
      dependsOn: ['user-model'],
      priority: 1,
      criteria: ['POST /login returns a token for valid credentials', 'invalid credentials get 401'],
      brief: 'Free-form brief for the builder.\n\nSecond paragraph.',
      file: '.tron/blocks/login.md',
      digest: createHash('sha256').update(Buffer.from(LOGIN, 'utf8')).digest('hex'),
    });
  });

  it('gives a block without priority or depends_on priority 0 and no dependencies', () => {
    const { block } = parseBlockFile(blockText('title = "T"\ncriteria = ["c"]'), '.tron/blocks/t.md');
    expect(block).toMatchObject({ priority: 0, dependsOn: [] });
  });

  it('reads a CRLF file the same as an LF one, except for the digest', () => {
    const crlf = LOGIN.replace(/\n/g, '\r\n');
    const lf = parseBlockFile(LOGIN, '.tron/blocks/login.md').block!;
    const { block, problems } = parseBlockFile(crlf, '.tron/blocks/login.md');
    expect(problems).toEqual([]);
    expect({ ...block, digest: '' }).toEqual({ ...lf, digest: '' });
    expect(block!.digest).not.toBe(lf.digest);
  });

  it('tolerates a byte-order mark before the first +++', () => {
    expect(parseBlockFile(`\uFEFF${LOGIN}`, '.tron/blocks/login.md').problems).toEqual([]);
  });

  it('reports a file without front matter', () => {
    const p = only('# Just markdown\n');
    expect(p).toMatchObject({ code: 'TRON_BLOCK_FRONTMATTER', path: '.tron/blocks/a.md:1' });
    expect(p.message).toMatch(/^no front matter; start the file with a line "\+\+\+"/);
  });

  it('says a front matter opened with +++ and never closed is not closed, instead of asking for a +++ at the start', () => {
    const p = only('+++\ntitle = "never closed"\ncriteria = ["c"]\nThe brief.\n');
    expect(p).toMatchObject({ code: 'TRON_BLOCK_FRONTMATTER', path: '.tron/blocks/a.md:1' });
    expect(p.message).toMatch(
      /^the front matter opened with "\+\+\+" on line 1 is never closed; add a line "\+\+\+" after the TOML settings/,
    );
    expect(p.message).not.toMatch(/start the file/);
  });

  it('suggests the nearest legal key for a misspelled one', () => {
    const p = only(blockText('title = "T"\ncriteria = ["c"]\ndepend_on = ["b"]'));
    expect(p).toMatchObject({ code: 'TRON_BLOCK_UNKNOWN_KEY', path: '.tron/blocks/a.md: depend_on' });
    expect(p.message).toMatch(/^unknown key "depend_on"; did you mean "depends_on"\? Fix its spelling or remove it/);
  });

  it('names a TOML error by its line in the whole file', () => {
    const p = only('+++\ntitle = "ok"\ncriteria = 3 3\n+++\nbrief\n');
    expect(p.code).toBe('TRON_BLOCK_TOML');
    expect(p.path).toBe('.tron/blocks/a.md:3:14');
    expect(only('+++\r\ntitle = "ok"\r\n\r\ncriteria = 3 3\r\n+++\r\n').path).toBe('.tron/blocks/a.md:4:14');
  });

  it('reports an unknown key with the keys allowed', () => {
    const p = only(blockText('title = "T"\ncriteria = ["c"]\ndepends = ["b"]'));
    expect(p).toMatchObject({ code: 'TRON_BLOCK_UNKNOWN_KEY', path: '.tron/blocks/a.md: depends' });
    expect(p.message).toMatch(/title, depends_on, priority, criteria/);
  });

  it('requires a title that is not blank', () => {
    expect(only(blockText('criteria = ["c"]'))).toMatchObject({ code: 'TRON_BLOCK_TITLE', path: '.tron/blocks/a.md: title' });
    expect(only(blockText('title = "  "\ncriteria = ["c"]'))).toMatchObject({ code: 'TRON_BLOCK_TITLE' });
  });

  it('requires at least one criterion, none of them blank', () => {
    expect(only(blockText('title = "T"'))).toMatchObject({ code: 'TRON_BLOCK_CRITERIA', path: '.tron/blocks/a.md: criteria' });
    expect(only(blockText('title = "T"\ncriteria = []'))).toMatchObject({ code: 'TRON_BLOCK_CRITERIA' });
    expect(only(blockText('title = "T"\ncriteria = ["ok", ""]'))).toMatchObject({
      code: 'TRON_BLOCK_CRITERIA',
      path: '.tron/blocks/a.md: criteria[1]',
    });
  });

  it('rejects a priority that is not a whole number', () => {
    expect(only(blockText('title = "T"\ncriteria = ["c"]\npriority = 1.5'))).toMatchObject({
      code: 'TRON_BLOCK_INVALID',
      path: '.tron/blocks/a.md: priority',
    });
  });

  it('rejects file names that are not block ids', () => {
    for (const name of ['Login', '-login', 'log_in', 'x'.repeat(64)]) {
      expect(only(blockText('title = "T"\ncriteria = ["c"]'), `.tron/blocks/${name}.md`)).toMatchObject({
        code: 'TRON_BLOCK_ID',
        path: `.tron/blocks/${name}.md`,
      });
    }
    expect(parseBlockFile(blockText('title = "T"\ncriteria = ["c"]'), `.tron/blocks/${'x'.repeat(63)}.md`).problems).toEqual([]);
  });

  it('reports a bad id and bad fields of one file together', () => {
    const { problems } = parseBlockFile(blockText('criteria = []'), '.tron/blocks/Bad.md');
    expect(problems.map((p) => p.code)).toEqual(['TRON_BLOCK_ID', 'TRON_BLOCK_TITLE', 'TRON_BLOCK_CRITERIA']);
  });
});

describe('checkRegister', () => {
  it('accepts a register whose dependencies all exist and form no cycle', () => {
    expect(checkRegister([block('a', ['b', 'c']), block('b', ['c']), block('c')])).toEqual([]);
  });

  it('reports a dependency on a block that does not exist', () => {
    const [p, ...rest] = checkRegister([block('a', ['ghost'])]);
    expect(rest).toEqual([]);
    expect(p).toMatchObject({ code: 'TRON_DEPENDS_UNKNOWN', path: '.tron/blocks/a.md: depends_on' });
    expect(p!.message).toBe('"ghost" names no block (no .tron/blocks/ghost.md); fix the id or add that block');
  });

  it('suggests the nearest block id for a misspelled dependency', () => {
    const [p, ...rest] = checkRegister([block('add'), block('subtract'), block('multiply', ['substract'])]);
    expect(rest).toEqual([]);
    expect(p).toMatchObject({ code: 'TRON_DEPENDS_UNKNOWN', path: '.tron/blocks/multiply.md: depends_on' });
    expect(p!.message).toBe(
      '"substract" names no block (no .tron/blocks/substract.md); did you mean "subtract"? Fix the id or add that block',
    );
  });

  it('reports a block that depends on itself', () => {
    expect(checkRegister([block('a', ['a'])])).toEqual([
      expect.objectContaining({ code: 'TRON_DEPENDS_SELF', path: '.tron/blocks/a.md: depends_on' }),
    ]);
  });

  it('names the whole cycle in order and the file that closes it', () => {
    const problems = checkRegister([block('c', ['a']), block('a', ['b']), block('b', ['c'])]);
    expect(problems).toEqual([
      {
        code: 'TRON_CYCLE',
        path: '.tron/blocks/c.md: depends_on',
        message: 'blocks a → b → c → a depend on each other; remove one depends_on (in .tron/blocks/c.md)',
      },
    ]);
  });

  it('reports each separate cycle once', () => {
    const problems = checkRegister([block('a', ['b']), block('b', ['a']), block('x', ['y']), block('y', ['x', 'a'])]);
    expect(problems.map((p) => p.message.split(';')[0])).toEqual([
      'blocks a → b → a depend on each other',
      'blocks x → y → x depend on each other',
    ]);
  });

  it('names blocks caught in the same tangle beyond the cycle shown', () => {
    const [p] = checkRegister([block('a', ['b']), block('b', ['a', 'c']), block('c', ['b'])]);
    expect(p!.message).toMatch(/^blocks a → b → a depend on each other/);
    expect(p!.message).toMatch(/c is caught in the same tangle/);
  });
});

describe('byPriority', () => {
  it('runs lower priorities first and breaks ties by id', () => {
    const blocks = [
      { ...block('b'), priority: 1 },
      { ...block('c'), priority: 0 },
      { ...block('a'), priority: 1 },
      { ...block('z'), priority: -1 },
    ];
    expect([...blocks].sort(byPriority).map((b) => b.id)).toEqual(['z', 'c', 'a', 'b']);
  });
});

describe('loading a repository', () => {
  let repo = '';
  afterEach(() => rmSync(repo, { recursive: true, force: true }));

  function makeRepo(files: Record<string, string | Buffer>): string {
    repo = mkdtempSync(path.join(tmpdir(), 'tron-register-'));
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(repo, rel)), { recursive: true });
      writeFileSync(path.join(repo, rel), text);
    }
    return repo;
  }

  it('reads .tron/blocks/*.md in sorted order and ignores other files and folders', () => {
    makeRepo({
      '.tron/config.toml': CONFIG,
      '.tron/blocks/login.md': LOGIN,
      '.tron/blocks/user-model.md': blockText('title = "User model"\ncriteria = ["a users table exists"]'),
      '.tron/blocks/api.md': blockText('title = "API"\ncriteria = ["c"]\ndepends_on = ["login"]'),
      '.tron/blocks/notes.txt': 'not a block',
      '.tron/blocks/drafts/wip.md': 'ignored: not directly in the register folder',
    });
    const { blocks, problems } = loadRegister(repo);
    expect(problems).toEqual([]);
    expect(blocks.map((b) => b.id)).toEqual(['api', 'login', 'user-model']);
    expect(blocks[1]!.file).toBe('.tron/blocks/login.md');
    const bytes = readFileSync(path.join(repo, '.tron/blocks/login.md'));
    expect(blocks[1]!.digest).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  it('refuses a block file larger than 256KB with a coded problem, and reads one just under it', () => {
    const big = blockText('title = "Big"\ncriteria = ["c"]', `${'x'.repeat(300 * 1024)}\n`);
    const fits = blockText('title = "Fits"\ncriteria = ["c"]', `${'x'.repeat(250 * 1024)}\n`);
    makeRepo({ '.tron/blocks/big.md': big, '.tron/blocks/fits.md': fits });
    const { blocks, problems } = loadRegister(repo);
    expect(problems).toEqual([expect.objectContaining({ code: 'TRON_BLOCK_TOO_LARGE', path: '.tron/blocks/big.md' })]);
    expect(problems[0]!.message).toContain('more than the 256KB');
    expect(blocks.map((b) => b.id)).toEqual(['fits']);
  });

  it('treats a missing register folder as an empty register', () => {
    makeRepo({ '.tron/config.toml': CONFIG });
    expect(loadRegister(repo)).toEqual({ blocks: [], problems: [] });
  });

  it('reports a file that is not UTF-8 text', () => {
    makeRepo({ '.tron/blocks/a.md': Buffer.from([0x2b, 0x2b, 0x2b, 0x0a, 0xff, 0xfe, 0x0a]) });
    expect(loadRegister(repo).problems).toEqual([expect.objectContaining({ code: 'TRON_BLOCK_READ', path: '.tron/blocks/a.md' })]);
  });

  it('reports the problems of every file and of the register together', () => {
    makeRepo({
      '.tron/blocks/a.md': blockText('title = "A"\ncriteria = ["c"]\ndepends_on = ["b", "nope"]'),
      '.tron/blocks/b.md': blockText('title = "B"\ncriteria = ["c"]\ndepends_on = ["a"]'),
      '.tron/blocks/c.md': blockText('title = "C"\ncriteria = ["c"]\ndepends_on = ["broken"]'),
      '.tron/blocks/broken.md': 'no front matter\n',
      '.tron/blocks/Upper.md': blockText('title = "U"\ncriteria = ["c"]'),
    });
    const { blocks, problems } = loadRegister(repo);
    expect(blocks.map((b) => b.id)).toEqual(['a', 'b', 'c']);
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_BLOCK_ID', '.tron/blocks/Upper.md'],
      ['TRON_BLOCK_FRONTMATTER', '.tron/blocks/broken.md:1'],
      ['TRON_DEPENDS_UNKNOWN', '.tron/blocks/a.md: depends_on'],
      ['TRON_CYCLE', '.tron/blocks/b.md: depends_on'],
    ]);
  });

  it('loadProject returns the config and the blocks of a valid repository', () => {
    makeRepo({ '.tron/config.toml': CONFIG, '.tron/blocks/user-model.md': blockText('title = "U"\ncriteria = ["c"]') });
    const { config, blocks } = loadProject(repo);
    expect(config.test).toBe('npm test');
    expect(blocks.map((b) => b.id)).toEqual(['user-model']);
  });

  it('loadProject throws one InputError with the config and register problems together', () => {
    makeRepo({
      '.tron/config.toml': `${CONFIG}\n[timeouts]\nturn = "forever"\n`,
      '.tron/blocks/a.md': blockText('title = "A"\ncriteria = ["c"]\ndepends_on = ["a"]'),
    });
    let error: unknown;
    try {
      loadProject(repo);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).problems.map((p) => p.code)).toEqual(['TRON_CONFIG_DURATION', 'TRON_DEPENDS_SELF']);
    expect((error as InputError).message).toMatch(/TRON_CONFIG_DURATION: \.tron\/config\.toml: timeouts\.turn: /);
  });

  it('loadProject reports a missing config even when the register is fine', () => {
    makeRepo({ '.tron/blocks/a.md': blockText('title = "A"\ncriteria = ["c"]') });
    expect(() => loadProject(repo)).toThrow(/TRON_CONFIG_MISSING/);
  });

  it('never writes anything, whether the repository is valid or not', () => {
    makeRepo({
      '.tron/config.toml': CONFIG,
      '.tron/blocks/a.md': blockText('title = "A"\ncriteria = ["c"]'),
      '.tron/blocks/b.md': blockText('title = "B"\ncriteria = ["c"]\ndepends_on = ["ghost"]').replace(/\n/g, '\r\n'),
    });
    const before = snapshot(repo);
    expect(() => loadProject(repo)).toThrow(InputError);
    loadRegister(repo);
    rmSync(path.join(repo, '.tron/blocks/b.md'));
    const valid = snapshot(repo);
    loadProject(repo);
    expect(snapshot(repo)).toEqual(valid);
    expect(Object.keys(before).filter((k) => !(k in valid))).toEqual([path.join('.tron', 'blocks', 'b.md')]);
  });
});
