import { describe, expect, it } from 'vitest';
import TOML from '@iarna/toml';
import { configToml, parseTemplate, selectTemplates, templateNames } from './template.ts';
import { differences, holds, type RunRecord } from './expect.ts';
import type { EventBody, TronEvent } from '../engine/core/events.ts';
import { InputError } from '../engine/core/errors.ts';

const MINIMAL = `title = "t"\n[blocks.a]\n[expect]\nexit = 0\n`;

function template(text: string) {
  const { template: t, problems } = parseTemplate(text, 'evaluation/templates/t.toml');
  if (!t) throw new Error(problems.map((p) => `${p.code}: ${p.path}: ${p.message}`).join('\n'));
  return t;
}

function run(index: number, exit: number | undefined, bodies: EventBody[]): RunRecord {
  const events = bodies.map((b, i) => ({ v: 1, seq: i + 1, ts: i, ...b }) as TronEvent);
  return { index, exit, events, runDir: undefined, output: [], replay: undefined };
}

const landed = (block: string): EventBody => ({
  type: 'block.landed',
  block,
  sha: 'a'.repeat(40),
  from: 'b'.repeat(40),
  top: 'a'.repeat(40),
});
const page = (block: string): EventBody => ({ type: 'page.sent', block, page: `${block}#1`, reason: 'r' });

describe('a SIM template', () => {
  it('names the file and key of every mistake at once', () => {
    const text = `title = "t"\nextra = 1\n[blocks.a]\n[[script.a.builder]]\nexplode = true\n[[script.ghost.builder]]\n[expect]\nexit = 0\n`;
    const first = parseTemplate(text, 'x.toml');
    expect(first.template).toBeUndefined();
    expect(first.problems.map((p) => `${p.code} ${p.path}`)).toEqual(['TRON_SIM_TEMPLATE x.toml']);
    expect(first.problems[0]!.message).toContain('extra');
    const second = parseTemplate(text.replace('extra = 1\n', ''), 'x.toml');
    expect(second.problems.map((p) => `${p.code} ${p.path}`)).toEqual(['TRON_SIM_TEMPLATE x.toml: script.a.builder.0']);
    expect(second.problems[0]!.message).toContain('explode');
    const third = parseTemplate(text.replace('extra = 1\n', '').replace('explode = true', 'reply = ">>DONE"'), 'x.toml');
    expect(third.problems.map((p) => `${p.code} ${p.path}`)).toEqual(['TRON_SIM_BLOCK x.toml: script.ghost']);
  });

  it('takes a crash point as a seq or as a pattern, not both', () => {
    const both = `title = "t"\n[blocks.a]\n[[runs]]\ncrash_after_event = 3\ncrash_after = { type = "land.intent" }\n[[runs]]\n[expect]\nexit = 0\n`;
    expect(parseTemplate(both, 'x.toml').problems.map((p) => `${p.code} ${p.path}`)).toEqual(['TRON_SIM_CRASH x.toml: runs[0]']);
    expect(template(both.replace('crash_after_event = 3\n', '')).runs[0]!.crash_after).toEqual({ type: 'land.intent' });
  });

  it('refuses a TOML syntax error with its line', () => {
    const { problems } = parseTemplate('title = \n', 'x.toml');
    expect(problems[0]!.code).toBe('TRON_SIM_TOML');
    expect(problems[0]!.path).toMatch(/^x\.toml:1:/);
  });

  it('runs once by default, with sim workers, its test command and its config extras', () => {
    const t = template(
      `title = "t"\n[repo]\ntest = "node t.js"\n[config]\narchitect = true\nmax_parallel = 1\n[config.timeouts]\nturn = "2s"\n[blocks.a]\n[expect]\nexit = 0\n`,
    );
    expect(t.runs).toHaveLength(1);
    const config = TOML.parse(configToml(t)) as Record<string, any>;
    expect(config).toMatchObject({ max_parallel: 1, test: 'node t.js', timeouts: { turn: '2s', test: '1m' } });
    expect(config.workers.architect).toEqual({ adapter: 'sim', script: '.tron/sim.toml' });
    expect(config.architect).toBeUndefined();
  });

  it('refuses a template name that does not exist, listing those that do', () => {
    expect(() => selectTemplates(['no-such-template'])).toThrow(InputError);
    expect(() => selectTemplates(['no-such-template'])).toThrow(/TRON_SIM_UNKNOWN.*happy-deps/);
  });

  it('ships at least sixteen scenarios, each a valid template', () => {
    expect(templateNames().length).toBeGreaterThanOrEqual(16);
    expect(selectTemplates([]).map((t) => t.name)).toEqual(templateNames());
  });
});

describe('checking runs against the expectation', () => {
  it('matches objects partially, arrays as subsets, and /…/ strings as patterns', () => {
    const facts = [
      { name: 'commits', ok: false, evidence: 'none' },
      { name: 'tests', ok: true, evidence: 'ok' },
    ];
    expect(holds({ facts, block: 'a' }, { facts: [{ name: 'commits', ok: false }] })).toBe(true);
    expect(holds({ facts, block: 'a' }, { facts: [{ name: 'commits', ok: true }] })).toBe(false);
    expect(holds({ reason: 'it depends on core, which was abandoned' }, { reason: '/depends on core/' })).toBe(true);
    expect(holds({ reason: 'blocked' }, { reason: '/^gate/' })).toBe(false);
    expect(holds({ a: 1 }, { b: undefined })).toBe(true);
  });

  it('passes runs that meet every expectation', () => {
    const t = template(`${MINIMAL}[[expect.events]]\ntype = "block.landed"\nblock = "a"\ntimes = 1\n`);
    expect(differences(t, [run(1, 0, [landed('a')])])).toEqual([]);
  });

  it('lists the exit, the counts, the absences, the order and the invariants that differ', () => {
    const t = template(
      `title = "t"\n[blocks.a]\n[blocks.b]\n[expect]\nexit = 0\nlanded_before = [["b", "a"]]\n` +
        `[[expect.events]]\ntype = "page.sent"\ntimes = 2\n[[expect.events]]\ntype = "worker.teleported"\n[[expect.absent]]\ntype = "page.sent"\nblock = "a"\n`,
    );
    const found = differences(t, [run(1, 3, [landed('a'), page('a'), landed('b'), landed('a')])]);
    expect(found).toEqual([
      'exit: expected 0, got 3',
      'landed order: expected b before a, but a landed first',
      'event type worker.teleported is not in the event table (engine/core/events.ts)',
      'expected 2 event(s) page.sent; found 1',
      'expected an event worker.teleported; none appeared',
      `expected no event page.sent {"block":"a"}; found 1, the first at run 1 seq 2: ${JSON.stringify({ v: 1, seq: 2, ts: 1, ...page('a') })}`,
      'invariant: a landed 2 times',
    ]);
  });

  it('checks that a crashed start stopped right at its crash point', () => {
    const t = template(`title = "t"\n[blocks.a]\n[[runs]]\ncrash_after = { type = "page.sent" }\n[[runs]]\n[expect]\nexit = 0\n`);
    const crashed = (bodies: EventBody[], at: number) => ({ ...run(1, undefined, bodies), crashAt: at });
    const finished: EventBody = { type: 'run.finished', reason: 'done', exit: 0, landed: [], parked: [], abandoned: [] };
    expect(differences(t, [crashed([landed('a'), page('a')], 2), run(2, 0, [])])).toEqual([]);
    expect(differences(t, [crashed([landed('a')], 2), run(2, 0, [])])).toEqual([
      'run 1: the crash hook was set at seq 2, but the log ends with block.landed at seq 1',
    ]);
    expect(differences(t, [crashed([page('a'), landed('a')], 2), run(2, 0, [])])).toEqual([
      'run 1: the crashed log ends with block.landed at seq 2, not page.sent',
    ]);
    expect(differences(t, [crashed([page('a'), finished], 2), run(2, 0, [])])).toEqual([
      'run 1: the crash hook did not stop the engine: the log ends with run.finished',
    ]);
  });

  it('checks each start of a multi-start template on its own events', () => {
    const t = template(
      `title = "t"\n[blocks.a]\n[[runs]]\nexit = 3\n[[runs.events]]\ntype = "page.sent"\n[[runs]]\n[[runs.absent]]\ntype = "page.sent"\n[expect]\nexit = 0\n`,
    );
    expect(differences(t, [run(1, 3, [page('a')]), run(2, 0, [landed('a')])])).toEqual([]);
    expect(differences(t, [run(1, 3, []), run(2, 0, [page('a')])])).toEqual([
      'run 1: expected an event page.sent; none appeared',
      `run 2: expected no event page.sent; found 1, the first at run 2 seq 1: ${JSON.stringify({ v: 1, seq: 1, ts: 0, ...page('a') })}`,
    ]);
  });
});
