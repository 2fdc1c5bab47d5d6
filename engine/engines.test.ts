/**
 * The Node.js floor `package.json` promises (`engines.node`, which the README repeats) is
 * one every package tron installs accepts: otherwise `npm install` on a Node the README
 * promises warns EBADENGINE, or the package fails at run time. Read from the lock file,
 * so a dependency upgrade that raises a floor fails here, not on a user's machine.
 */
import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { tronPath } from './root.ts';

const pkg = JSON.parse(readFileSync(tronPath('package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(tronPath('package-lock.json'), 'utf8')) as {
  packages: Record<string, { dev?: boolean; engines?: { node?: string } | string[] }>;
};

describe('the Node.js floor', () => {
  it('is accepted by every package a user installs, and the README names it', () => {
    const floor = semver.minVersion(pkg.engines.node)!;
    const refusing = Object.entries(lock.packages).flatMap(([name, p]) => {
      const range = Array.isArray(p.engines) ? undefined : p.engines?.node;
      if (!name || p.dev || range === undefined || !semver.validRange(range)) return [];
      return semver.satisfies(floor, range) ? [] : [`${name.replace(/^.*node_modules\//, '')} needs node ${range}`];
    });
    expect(refusing, `engines.node is ${pkg.engines.node}`).toEqual([]);
    expect(readFileSync(tronPath('README.md'), 'utf8')).toContain(`Node ≥ ${floor.major}.${floor.minor}`);
  });
});
