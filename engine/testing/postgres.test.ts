/**
 * A contributor learns from docs/contributing.md how the database tests get their PostgreSQL: the
 * throwaway cluster this helper starts, or a server that is up, named in the variable the
 * helper reads — with commands that agree with each other (the role made is the one the
 * URL logs in as).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { tronPath } from '../root.ts';
import { TEST_DATABASE_ENV } from './postgres.ts';

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
