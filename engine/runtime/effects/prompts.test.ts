import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { legalWords, wordForms } from '../../gateway/parse.ts';
import { GLOSSARY, WORDS, type Word } from '../../gateway/glossary.ts';
import {
  PARTS,
  placeholdersOf,
  PROMPT_VARS,
  PROMPTS,
  PROMPTS_DIR,
  PromptError,
  renderPrompt,
  type PromptContext,
  type PromptName,
} from './prompts.ts';

/** The variables and context the engine passes to each prompt in the ordinary case. */
const CASES: Record<PromptName, { vars: Record<string, string>; ctx: PromptContext }> = {
  build: {
    vars: {
      block: 'login',
      title: 'Add a login endpoint',
      brief: 'Use the existing user model. Return {"token": "…"}.',
      criteria: 'c1. POST /login returns a token\nc2. invalid credentials get 401',
      trunk: 'main',
      guidance: '',
      feedback: '',
    },
    ctx: { role: 'builder', phase: 'build', expect: ['DONE', 'BLOCKED', 'WORKING'] },
  },
  challenge: {
    vars: { block: 'login', criteria: 'c1. POST /login returns a token', facts: '- 2 new commits over base\n- tests green' },
    ctx: { role: 'builder', phase: 'build', expect: ['CONFIRMED', 'BLOCKED'] },
  },
  review: {
    vars: {
      block: 'login',
      title: 'Add a login endpoint',
      brief: 'Use the existing user model.',
      criteria: 'c1. POST /login returns a token',
      sha: '0123456789abcdef0123456789abcdef01234567',
      diffstat: ' src/login.ts | 40 ++++\n 1 file changed',
    },
    ctx: { role: 'reviewer', phase: 'review' },
  },
  merge: {
    vars: { block: 'login', trunk: 'main', trunk_sha: 'fedcba9876543210fedcba9876543210fedcba98', conflicts: '- src/login.js' },
    ctx: { role: 'builder', phase: 'merge' },
  },
  probe: { vars: { block: 'login', elapsed: '25m' }, ctx: { role: 'builder', phase: 'build', expect: ['WORKING'] } },
  restate: {
    vars: { reason: 'Your reply has no `>>` line.' },
    ctx: { role: 'reviewer', phase: 'review' },
  },
  architect: {
    vars: {
      block: 'login',
      title: 'Add a login endpoint',
      criteria: 'c1. POST /login returns a token',
      trouble: 'gate_budget',
      detail: 'The tests failed at the branch head three times: test/login.test.ts.',
      attempts: '3',
      history: '>>DONE\n(tests red)',
    },
    ctx: { role: 'architect', phase: 'build' },
  },
};

function wordsOf(ctx: PromptContext): readonly Word[] {
  return ctx.expect ?? legalWords(ctx.role, ctx.phase);
}

const temps: string[] = [];
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A copy of prompts/ in a temp folder, with some files replaced. */
function promptsWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-prompts-'));
  temps.push(dir);
  cpSync(PROMPTS_DIR, dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

function thrown(fn: () => unknown): PromptError {
  try {
    fn();
  } catch (e) {
    if (e instanceof PromptError) return e;
    throw e;
  }
  throw new Error('expected a PromptError');
}

describe('each prompt', () => {
  it.each(PROMPTS)('%s renders with its variables, the persona and exactly its legal words', (name) => {
    const { vars, ctx } = CASES[name];
    const text = renderPrompt(name, vars, ctx);
    for (const value of Object.values(vars)) expect(text).toContain(value);
    expect(text).toContain(`You are the ${ctx.role}`);
    for (const word of WORDS) {
      const listed = text.includes(`\`${wordForms(word).at(-1)}\` — ${GLOSSARY[word].meaning}`);
      expect(listed, word).toBe(wordsOf(ctx).includes(word));
    }
    expect(text).not.toMatch(/\{[#/]?[a-z][a-z0-9_]*\}/);
    expect(text.endsWith('\n') && !text.endsWith('\n\n')).toBe(true);
  });

  it.each(PROMPTS)('%s mentions by name only words its worker may send', (name) => {
    const template = readFileSync(join(PROMPTS_DIR, `${name}.md`), 'utf8');
    const mentioned = WORDS.filter((w) => new RegExp(`\\b${w}\\b`).test(template));
    const allowed = wordsOf(CASES[name].ctx);
    for (const w of mentioned) expect(allowed, `${name}.md names ${w}`).toContain(w);
  });
});

describe('sections', () => {
  it('leave out guidance and feedback headings when those are empty', () => {
    const text = renderPrompt('build', CASES.build.vars, CASES.build.ctx);
    expect(text).not.toContain('## Guidance');
    expect(text).not.toContain('## What failed last round');
    expect(text).not.toMatch(/\n\n\n/);
  });

  it('keep them, with the text, when given', () => {
    const vars = { ...CASES.build.vars, guidance: 'use the v2 API', feedback: 'tests failed at head: test/login.test.ts' };
    const text = renderPrompt('build', vars, CASES.build.ctx);
    expect(text).toContain('## Guidance\n\nuse the v2 API\n');
    expect(text).toContain('## What failed last round');
    expect(text).toContain('tests failed at head: test/login.test.ts');
  });

  it('must be closed', () => {
    const dir = promptsWith({ 'probe.md': '{#elapsed}late {block}\n{gateway}\n' });
    const e = thrown(() => renderPrompt('probe', CASES.probe.vars, CASES.probe.ctx, dir));
    expect(e.message).toContain('section tag {#elapsed} has no closing tag');
  });
});

describe('placeholders', () => {
  it('an unknown placeholder in a file is an error naming the file and the placeholder', () => {
    const dir = promptsWith({ 'probe.md': 'Block {block}, {elapsed}, {colour}\n{gateway}\n' });
    const e = thrown(() => renderPrompt('probe', CASES.probe.vars, CASES.probe.ctx, dir));
    expect(e.code).toBe('TRON_PROMPT_PLACEHOLDER');
    expect(e.path).toBe(join(dir, 'probe.md'));
    expect(e.message).toContain('{colour}');
  });

  it('an unknown placeholder in a shared part is an error naming that part', () => {
    const dir = promptsWith({ 'persona.md': 'You are the {role} of {team}.\n' });
    const e = thrown(() => renderPrompt('probe', CASES.probe.vars, CASES.probe.ctx, dir));
    expect(e.path).toBe(join(dir, 'persona.md'));
    expect(e.message).toContain('{team}');
  });

  it('a placeholder the caller did not supply is an error', () => {
    const { elapsed: _elapsed, ...vars } = CASES.probe.vars;
    const e = thrown(() => renderPrompt('probe', vars, CASES.probe.ctx));
    expect(e.code).toBe('TRON_PROMPT_PLACEHOLDER');
    expect(e.path).toBe('prompts/probe.md');
    expect(e.message).toContain('{elapsed} was not supplied');
  });

  it('a variable the prompt has no place for is an error, so a typo cannot drop text', () => {
    const e = thrown(() => renderPrompt('probe', { ...CASES.probe.vars, elapse: '3m' }, CASES.probe.ctx));
    expect(e.message).toContain('{elapse}');
  });

  it('braces that are not placeholders are literal, and values are never re-scanned', () => {
    const dir = promptsWith({ 'probe.md': 'Send {"progress": "…"} or {Block} or { block }: {block}\n{gateway}\n' });
    const text = renderPrompt('probe', { block: '{elapsed} $& {gateway}', elapsed: '1m' }, CASES.probe.ctx, dir);
    expect(text).toContain('Send {"progress": "…"} or {Block} or { block }: {elapsed} $& {gateway}\n');
  });

  it('a prompt without the gateway part is refused', () => {
    const dir = promptsWith({ 'probe.md': 'Block {block}, {elapsed}\n' });
    expect(thrown(() => renderPrompt('probe', CASES.probe.vars, CASES.probe.ctx, dir)).message).toContain('{gateway}');
  });

  it('a missing file is named', () => {
    const dir = promptsWith({});
    rmSync(join(dir, 'merge.md'));
    const e = thrown(() => renderPrompt('merge', CASES.merge.vars, CASES.merge.ctx, dir));
    expect(e.code).toBe('TRON_PROMPT_MISSING');
    expect(e.path).toBe(join(dir, 'merge.md'));
  });
});

describe('the prompts folder', () => {
  const files = readdirSync(PROMPTS_DIR).sort();

  it('has a file for every prompt the engine names, and every file is a prompt or a shared part', () => {
    const expected = [...PROMPTS, ...Object.keys(PARTS)].map((n) => `${n}.md`).sort();
    expect(files).toEqual(expected);
  });

  it.each(PROMPTS)('%s.md uses every variable the engine passes it, and the shared parts', (name) => {
    const used = placeholdersOf(readFileSync(join(PROMPTS_DIR, `${name}.md`), 'utf8'));
    expect(used.sort()).toEqual([...PROMPT_VARS[name], 'persona', 'gateway'].sort());
  });

  it('shared parts use exactly their own placeholders', () => {
    for (const [part, names] of Object.entries(PARTS)) {
      expect(placeholdersOf(readFileSync(join(PROMPTS_DIR, `${part}.md`), 'utf8'))).toEqual([...names]);
    }
  });
});
