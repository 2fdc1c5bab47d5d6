/**
 * A contributor learns from docs/contributing.md how the database tests get their PostgreSQL: the
 * throwaway cluster this helper starts, or a server that is up, named in the variable the
 * helper reads — with commands that agree with each other (the role made is the one the
 * URL logs in as).
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tronPath } from '../root.ts';
import { startCluster, TEST_DATABASE_ENV } from './postgres.ts';

describe('the contributing guide on the database tests', () => {
  it('says they need PostgreSQL, how to start Debian’s cluster, and how to name it in the variable the tests read', () => {
    const readme = readFileSync(tronPath('docs', 'contributing.md'), 'utf8');
    const at = readme.indexOf('**The database tests need PostgreSQL.**');
    expect(at).toBeGreaterThan(readme.indexOf('**Running the tests.**'));
    const section = readme.slice(at, readme.indexOf('\n## ', at));
    expect(section).toContain('initdb');
    expect(section).toMatch(/^pg_ctlcluster \d+ main start\b/m);
    const role = /create role (\w+) login createdb password '(\w+)'/.exec(section);
    const given = new RegExp(`^export ${TEST_DATABASE_ENV}=(\\S+)$`, 'm').exec(section);
    expect(role).not.toBeNull();
    expect(given).not.toBeNull();
    const url = new URL(given![1]!);
    expect([url.protocol, url.username, url.password, url.hostname]).toEqual(['postgres:', role![1], role![2], '127.0.0.1']);
  });
});

describe('a throwaway cluster', () => {
  it('that cannot be made leaves no folder of its own behind', async () => {
    // Server programs whose initdb fails, as a missing locale or a full disk makes it fail.
    const bin = mkdtempSync(join(tmpdir(), 'tron-pg-bin-'));
    const under = mkdtempSync(join(tmpdir(), 'tron-pg-under-'));
    try {
      for (const dir of [bin, under]) chmodSync(dir, 0o755);
      for (const program of ['initdb', 'pg_ctl']) {
        writeFileSync(join(bin, program), '#!/bin/sh\necho "cannot make the cluster" >&2\nexit 1\n');
        chmodSync(join(bin, program), 0o755);
      }
      await expect(startCluster(bin, under)).rejects.toThrow();
      expect(readdirSync(under)).toEqual([]);
    } finally {
      for (const dir of [bin, under]) rmSync(dir, { recursive: true, force: true });
    }
  });
});
