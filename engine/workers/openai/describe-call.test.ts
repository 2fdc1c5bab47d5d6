import { describe, expect, it } from 'vitest';
import { describeCall } from './tools.ts';

describe('describeCall', () => {
  it('says in one line what a tool call does, for the live board and the turn log', () => {
    expect(describeCall('run', JSON.stringify({ argv: ['npm', 'test'] }))).toBe('run npm test');
    expect(describeCall('run', JSON.stringify({ shell: 'npm test &&\n  npm run lint' }))).toBe('run npm test && npm run lint');
    expect(describeCall('edit_file', JSON.stringify({ path: 'src/a.ts', old: 'x', new: 'y' }))).toBe('edit_file src/a.ts');
    expect(describeCall('search', JSON.stringify({ pattern: 'TODO' }))).toBe('search "TODO" in .');
    expect(describeCall('list_dir', '{not json')).toBe('list_dir {not json');
    expect(describeCall('run', JSON.stringify({ shell: 'x'.repeat(500) })).length).toBe(160);
  });
});
