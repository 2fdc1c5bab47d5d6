/**
 * Golden runs: every template's recorded run, kept under `runs/<template>/` (a template
 * of several starts keeps `runs/<template>/run-<n>/` per start) and replayed by the test
 * suite, as Temporal replays its history files. A change in the decision step that
 * alters any recorded decision makes a golden run diverge; if the change is intended,
 * record again with `tron sim --record`.
 *
 * What is kept is normalised so a recording does not depend on where or when it was
 * made: the temporary repository's path becomes `$REPO`, times count from the run's
 * start, the run id becomes the template's name, and host details (host name, pid,
 * start time) are dropped. Only `events.jsonl`, `workflow.toml` and `manifest.json`
 * are kept: exactly what `tron replay` reads.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { TronEvent } from '../engine/core/events.ts';
import type { RunRecord } from './expect.ts';
import { tronPath } from '../engine/root.ts';

/** Where golden runs live in the tron checkout. */
export const RUNS_DIR = `${tronPath('runs')}/`;

/** The placeholder for the temporary repository's path. */
export const REPO_PLACEHOLDER = '$REPO';

export interface Normalising {
  /** Absolute path of the temporary repository. */
  repo: string;
  /** What the run id becomes. */
  runId: string;
}

function replacePath(text: string, repo: string): string {
  return text.split(repo).join(REPO_PLACEHOLDER);
}

/** events.jsonl, normalised: ts relative to the first event, run id and pid fixed, the repo path replaced. */
export function normaliseEvents(events: readonly TronEvent[], n: Normalising): string {
  const t0 = events[0]?.ts ?? 0;
  const lines = events.map((e) => {
    const copy = { ...e, ts: e.ts - t0 } as TronEvent;
    if (copy.type === 'run.started') Object.assign(copy, { run: n.runId, pid: 0 });
    return JSON.stringify(copy);
  });
  return replacePath(lines.map((l) => `${l}\n`).join(''), n.repo);
}

/**
 * manifest.json, normalised: no start time, host, or sandbox used (whether bwrap runs is
 * the host's); the run id fixed; where it came from.
 */
export function normaliseManifest(text: string, n: Normalising, sim: Record<string, unknown>): string {
  const manifest = JSON.parse(text) as Record<string, unknown>;
  delete manifest.started_at;
  delete manifest.host;
  delete manifest.sandbox;
  manifest.run = n.runId;
  manifest.sim = sim;
  return replacePath(`${JSON.stringify(manifest, null, 2)}\n`, n.repo);
}

/**
 * Writes a template's runs as its golden runs under `root/<name>/`, replacing what was
 * there. Returns the directories written.
 */
export function recordGolden(name: string, runs: readonly RunRecord[], repo: string, root: string = RUNS_DIR): string[] {
  const dest = join(root, name);
  rmSync(dest, { recursive: true, force: true });
  const written: string[] = [];
  for (const r of runs) {
    if (!r.runDir) continue;
    const dir = runs.length === 1 ? dest : join(dest, `run-${r.index}`);
    const runId = runs.length === 1 ? name : `${name}-${r.index}`;
    const n = { repo, runId };
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'events.jsonl'), normaliseEvents(r.events, n));
    copyFileSync(join(r.runDir, 'workflow.toml'), join(dir, 'workflow.toml'));
    const sim = { template: name, run: r.index, runs: runs.length, ...(r.crashAt !== undefined ? { crash_after_event: r.crashAt } : {}) };
    writeFileSync(join(dir, 'manifest.json'), normaliseManifest(readFileSync(join(r.runDir, 'manifest.json'), 'utf8'), n, sim));
    written.push(dir);
  }
  return written;
}

/** Every golden run directory under `root` (those holding an events.jsonl), sorted. */
export function goldenRunDirs(root: string = RUNS_DIR): string[] {
  if (!existsSync(root)) return [];
  const found: string[] = [];
  const walk = (dir: string) => {
    if (existsSync(join(dir, 'events.jsonl'))) found.push(dir);
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
    }
  };
  walk(root);
  return found.sort();
}

/** The template a golden run directory belongs to: its first path segment under `root`. */
export function goldenTemplate(dir: string, root: string = RUNS_DIR): string {
  return relative(root, dir).split(/[\\/]/)[0]!;
}
