/**
 * Test setup: every test process keeps tron's per-repository state (the signing keys of
 * engine/log/keys.ts) in a folder of its own under the OS temp folder, never in the
 * HOME of the machine running the tests. Child processes (the CLI, workers) inherit it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'tron-state-'));
process.env.XDG_STATE_HOME = dir;
afterAll(() => rmSync(dir, { recursive: true, force: true }));
