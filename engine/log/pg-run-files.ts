/**
 * A run's fixed files in the database (`tron_run_files`, schema version 2): the spine that
 * drove it (`workflow.toml`) and its `manifest.json`, written once by the engine that
 * starts the run, with its lease's generation (the same trigger as `tron_events` refuses
 * an old one). `tron replay` and `tron view` need them beside the events; with them in the
 * table, they read a run from any host, as from its run directory.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Lease } from './lease.ts';
import { type Database, fencedWrite, type RunKey } from './pg-log.ts';

/** The files of a run directory that the table keeps. */
export const RUN_FILES = ['workflow.toml', 'manifest.json'] as const;
export type RunFileName = (typeof RUN_FILES)[number];

/** Copies the run directory's fixed files into the table (those present; a file already there is kept). */
export async function saveRunFiles(db: Database, lease: Lease, run: string, runDir: string): Promise<void> {
  const names: string[] = [];
  const bodies: string[] = [];
  for (const name of RUN_FILES) {
    const file = join(runDir, name);
    if (!existsSync(file)) continue;
    names.push(name);
    bodies.push(readFileSync(file, 'utf8'));
  }
  if (names.length === 0) return;
  await fencedWrite(
    lease.repository,
    lease.generation,
    db.client.query(
      `insert into tron_run_files (repository, run, name, generation, body)
       select $1, $2, u.name, $3, u.body from unnest($4::text[], $5::text[]) as u(name, body)
       on conflict (repository, run, name) do nothing`,
      [lease.repository, run, lease.generation, names, bodies],
    ),
  );
}

/**
 * The fixed files the table holds for a run, by name: only the names tron keeps there
 * (RUN_FILES). Its readers write them into a run directory by that name, so a row of any
 * other name — `../../x`, written by anyone but tron — is left out, never a path.
 */
export async function readRunFiles(db: Database, at: RunKey): Promise<Partial<Record<RunFileName, string>>> {
  const { rows } = await db.client.query<{ name: string; body: string }>(
    'select name, body from tron_run_files where repository = $1 and run = $2',
    [at.repository, at.run],
  );
  return Object.fromEntries(rows.filter((r) => (RUN_FILES as readonly string[]).includes(r.name)).map((r) => [r.name, r.body]));
}
