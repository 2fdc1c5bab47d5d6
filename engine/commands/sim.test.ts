import { afterAll, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simCommand } from './sim.ts';
import { replayRunDir } from './replay.ts';
import { TEMPLATES_DIR } from '../../evaluation/template.ts';

const scratch: string[] = [];
afterAll(() => {
  for (const d of scratch) rmSync(d, { recursive: true, force: true });
});

function dir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  scratch.push(d);
  return d;
}

describe('tron sim', () => {
  it('prints a row per template and a summary, keeps a failing template with what differed, and records only passing ones', async () => {
    const templates = dir('tron-templates-');
    const runs = dir('tron-golden-');
    copyFileSync(join(TEMPLATES_DIR, 'done-no-commits.toml'), join(templates, 'passes.toml'));
    const wrong = readFileSync(join(TEMPLATES_DIR, 'done-no-commits.toml'), 'utf8').replace('exit = 0', 'exit = 3');
    writeFileSync(join(templates, 'expects-too-much.toml'), wrong);
    const lines: string[] = [];
    const code = await simCommand({ templates: [], record: true, templatesDir: templates, runsDir: runs, print: (l) => lines.push(l) });
    const out = lines.join('\n');
    expect(code).toBe(1);
    expect(out).toMatch(/^template +result +landed +events +escalations +time$/m);
    expect(out).toMatch(/^passes +pass +1\/1 +\d+ +0 +\d+\.\ds$/m);
    expect(out).toMatch(/^expects-too-much +FAIL +1\/1 /m);
    expect(out).toContain('  - exit: expected 3, got 0');
    const kept = out.match(/repository kept: (.*)/)![1]!;
    scratch.push(kept);
    expect(existsSync(join(kept, '.tron', 'runs'))).toBe(true);
    expect(out).toMatch(/run directory: .*\.tron\/runs\/\d{8}-\d{6}-\d{3}/);
    expect(out).toContain('sim: 1 of 2 templates passed, 1 FAILED');

    // The passing template's run, normalised: no temp path, times from 0, no host.
    expect(existsSync(join(runs, 'expects-too-much'))).toBe(false);
    const events = readFileSync(join(runs, 'passes', 'events.jsonl'), 'utf8');
    expect(events).not.toContain(tmpdir());
    expect(JSON.parse(events.split('\n')[0]!)).toMatchObject({ seq: 1, ts: 0, type: 'run.started', run: 'passes', pid: 0 });
    const manifest = JSON.parse(readFileSync(join(runs, 'passes', 'manifest.json'), 'utf8'));
    expect(manifest.host).toBeUndefined();
    expect(manifest.sandbox).toBeUndefined();
    expect(manifest.started_at).toBeUndefined();
    expect(manifest.sim).toEqual({ template: 'passes', run: 1, runs: 1 });
    expect(replayRunDir(join(runs, 'passes')).result).toMatchObject({ ok: true });
  }, 120_000);

  it('prints the coverage table and fails when an edge is reached by no passing template', async () => {
    const lines: string[] = [];
    const code = await simCommand({ templates: ['done-no-commits'], coverage: true, print: (l) => lines.push(l) });
    const out = lines.join('\n');
    expect(code).toBe(1);
    expect(out).toMatch(/build —gate\.failed→ build +done-no-commits/);
    expect(out).toMatch(/parked —RETRY→ build +UNREACHED/);
    expect(out).toMatch(/trunk_touched +UNREACHED/);
    expect(out).toContain('— INCOMPLETE (of the templates named only)');
    expect(out).toContain('sim: 1 of 1 templates passed');
  }, 120_000);
});
