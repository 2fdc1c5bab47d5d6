import { describe, expect, it } from 'vitest';
import { DatabaseLostError, LeaseLostError } from '../log/pg-log.ts';
import { RunDirGoneError } from '../log/eventlog.ts';
import { codedLine } from './failure.ts';
import { FaultError } from '../core/errors.ts';

describe('a fault error', () => {
  it('is its coded line, keeps its code and its class name, and is printed as it is', () => {
    const lost = new DatabaseLostError('postgres://tron:secret@db.example/tron', 'the connection ended');
    expect(lost).toBeInstanceOf(FaultError);
    expect(lost.code).toBe('TRON_DB_LOST');
    expect(lost.name).toBe('DatabaseLostError');
    expect(lost.message).toMatch(/^TRON_DB_LOST: the database at postgres:\/\/tron:\*+@db\.example\/tron did not commit/);
    expect(lost.message).not.toContain('secret');
    // The CLI's one line for an unexpected failure leaves a coded one as it is.
    expect(codedLine(lost, 'tron start')).toBe(lost.message);
    const gone = new RunDirGoneError('/repo/.tron/runs/x/events.jsonl');
    expect([gone.code, gone.name, gone.file]).toEqual(['TRON_RUN_DIR_GONE', 'RunDirGoneError', '/repo/.tron/runs/x/events.jsonl']);
    expect(new LeaseLostError('repo', 'taken over')).not.toBeInstanceOf(DatabaseLostError);
  });
});
