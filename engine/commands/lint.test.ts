import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ESCALATION } from '../spine/spine.ts';
import { loadSpine, SPINE_FILE } from '../spine/load.ts';
import { lintCommand } from './lint.ts';

let tmp: string | undefined;
afterEach(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = undefined;
});

function tempSpine(text: string): string {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'tron-lint-'));
  const file = path.join(tmp, 'workflow.toml');
  writeFileSync(file, text);
  return file;
}

async function run(spine?: string): Promise<{ status: number; lines: string[] }> {
  const lines: string[] = [];
  const status = await lintCommand({ spine, print: (line) => lines.push(line) });
  return { status, lines };
}

describe('tron lint', () => {
  it('says the real spine and ESCALATION are clean, with their sizes, and exits 0', async () => {
    const spine = loadSpine();
    const transitions = spine.phases.reduce((n, p) => n + p.transitions.length, 0);
    expect(await run()).toEqual({
      status: 0,
      lines: [
        `tron lint: engine/workflow.toml and ESCALATION are clean (${spine.phases.length} phases, ${transitions} transitions, ${Object.keys(ESCALATION).length} escalation rows)`,
      ],
    });
  });

  it('prints every problem of a broken spine file as CODE: path: message and exits 2', async () => {
    const text = readFileSync(SPINE_FILE, 'utf8')
      .replace('start = "build"', 'start = "biuld"')
      .replace('{ on = "APPROVE", to = "merge"', '{ on = "APPROVE", to = "merj"');
    const file = tempSpine(text);
    const { status, lines } = await run(file);
    const at = file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    expect(status).toBe(2);
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(new RegExp(`^TRON_SPINE_START_UNKNOWN: ${at}: start: .+`)),
        expect.stringMatching(new RegExp(`^TRON_SPINE_TARGET_UNKNOWN: ${at}: phases\\.review\\.transitions\\[0\\]\\.to: .+`)),
      ]),
    );
    expect(lines.some((l) => l.includes('are clean'))).toBe(false);
  });

  it('reports a spine that does not parse, and one that cannot be read, with exit 2', async () => {
    const broken = await run(tempSpine('version = 1\nstart = [\n'));
    expect(broken.status).toBe(2);
    expect(broken.lines).toEqual([expect.stringMatching(/^TRON_SPINE_TOML: .*workflow\.toml:\d+:\d+: /)]);
    const missing = await run(path.join(os.tmpdir(), 'tron-no-such-dir', 'workflow.toml'));
    expect(missing).toMatchObject({ status: 2, lines: [expect.stringMatching(/^TRON_SPINE_READ: /)] });
  });
});
