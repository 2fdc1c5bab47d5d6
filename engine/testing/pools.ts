/**
 * A registered pool for the queue's tests: the name and token its calls carry
 * (engine/queue/pg-job-scope.ts), registered as the given client's database role.
 */
import type pg from 'pg';
import { type Caller, registerPool } from '../queue/pg-jobs.ts';

/** Registers `worker` for `repository` with `roles` (an agent's pool unless `own`), silent for at most `lapseMs`. */
export async function poolOf(
  client: pg.ClientBase,
  worker: string,
  repository: string,
  o: { roles?: readonly string[]; lapseMs?: number; own?: boolean; slots?: number } = {},
): Promise<Caller> {
  const { token } = await registerPool(client, {
    worker,
    host: 'test',
    repository,
    roles: o.roles ?? ['test'],
    slots: o.slots ?? 1,
    lapseMs: o.lapseMs ?? 60_000,
    own: o.own ?? false,
  });
  return { worker, token };
}
