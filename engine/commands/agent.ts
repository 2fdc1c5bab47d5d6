/**
 * `tron agent --database URL [--slots N] [--roles builder,reviewer,test]`: a host that runs
 * worker turns for an engine elsewhere (docs/cluster.md). It works in its own clone of the
 * repository (`--repo`), reads its config and workers from there, and claims from the
 * database's queue the turns its roles allow. For each job it fetches the remote's trunk
 * and the block's work ref (`refs/tron/work/<id>`) at the exact sha, runs the turn in its
 * own checkout under the same sandbox `tron start` uses, pushes a builder's commits back
 * to `refs/tron/work/<id>` (by lease), and reports the reply and the usage as the job's
 * result. Its pool heartbeats; if it dies, another agent re-runs its job as a new attempt,
 * and the database refuses this one's late result. With role `test` it runs the engine's
 * test runs too: the sha fetched from its `refs/tron/test/<sha>`, the suite in a checkout
 * of its own (engine/queue/agent-tests.ts).
 *
 * It never sees the engine's key (there is none in its clone's state), never writes the
 * log, and needs of the database only what its role grants (docs/cluster.md, "Roles").
 */
import { existsSync, mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Clock, sleep } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import type { EventBody } from '../core/events.ts';
import type { WorkerRole } from '../core/roles.ts';
import * as git from '../git/index.ts';
import { gitOut } from '../git/run.ts';
import { credentialPaths, fetchRef, fetchTrunk, fetchTrunkAndWork, openRemote, pushRef, type Remote, remoteAccess } from '../git/remote.ts';
import type pg from 'pg';
import { databaseUrl, isConnectionLost, repositoryName } from '../log/cluster.ts';
import { AGENT_SCHEMA_VERSION, type Caller, checkQueueVersion, connect } from '../queue/pg-jobs.ts';
import type { Claimed, JobKey, JobResult } from '../queue/pg-job-types.ts';
import { redact } from '../log/pg-log.ts';
import { CheckoutPool } from '../runtime/effects/checkouts.ts';
import { type EffectContext, errorLine, Queues } from '../runtime/effects/context.ts';
import type { TurnRequest } from '../runtime/effects/turn.ts';
import { AgentControl, type HeldTurn } from '../queue/agent-control.ts';
import { probe } from '../runtime/effects/liveness.ts';
import { ALL_WORK_REFS, WORK_PREFIX } from '../runtime/effects/work-ref.ts';
import { workRefs } from '../queue/work-fetch.ts';
import { runJob, startWorkers } from '../queue/job-queue.ts';
import { runSuiteHere } from '../queue/agent-tests.ts';
import { refusedJobNames } from '../queue/job-names.ts';
import { loadSpine } from '../spine/load.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import { createWorker } from '../workers/create.ts';
import { chooseSandbox } from '../workers/sandbox.ts';
import { checkProject, requireRepo } from './project-check.ts';
import { stateHome } from '../log/keys.ts';
import { AGENT_OUTPUT_BYTES, followOutput, tailOf, turnLogPath } from '../log/turn-log.ts';

/** The roles an agent may take: worker turns, and `test` — the suites of the engine's test runs (engine/queue/agent-tests.ts). */
export const AGENT_ROLES = ['builder', 'reviewer', 'architect', 'test'] as const;

export interface AgentOptions {
  /** The agent's own clone of the repository. */
  repo: string;
  database?: string;
  slots?: number;
  roles?: readonly string[];
  clock: Clock;
  env: Record<string, string | undefined>;
  print: (line: string) => void;
  /** Stops the agent: no new job is claimed, running ones finish. */
  stop?: AbortSignal;
  /** Install SIGINT/SIGTERM handlers (the CLI does). */
  signals?: boolean;
  /** Replace configured workers (tests). */
  workers?: Partial<Record<WorkerRole, WorkerAdapter>>;
}

function usage(path: string, message: string): InputError {
  return new InputError([{ code: 'TRON_USAGE', path, message }]);
}

export async function agentCommand(o: AgentOptions): Promise<number> {
  const repo = resolve(o.repo);
  requireRepo(repo);
  // An agent that can build can test: with jobs = "agents" every test run waits for one with role test.
  const roles = o.roles ?? ['builder', 'reviewer', 'test'];
  const wrong = roles.filter((r) => !(AGENT_ROLES as readonly string[]).includes(r));
  if (wrong.length > 0 || roles.length === 0)
    throw usage(
      '--roles',
      `${wrong.length > 0 ? `unknown role ${wrong.join(', ')}` : 'no role given'}: an agent takes any of ${AGENT_ROLES.join(', ')}`,
    );
  const slots = o.slots ?? 1;
  if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw usage('--slots', 'must be a whole number from 1 to 64');
  // The worker CLIs are checked where turns run: a host that only tests needs none.
  const { config } = await checkProject(repo, o.workers || !roles.some((r) => r !== 'test') ? undefined : o.env);
  const url = o.database ?? databaseUrl(config.cluster, o.env);
  if (!url) throw usage('--database', 'an agent claims jobs from a database: give --database URL, TRON_DATABASE_URL or [cluster] database');
  if (!config.remote)
    throw usage('[remote]', "an agent fetches and pushes through the repository's remote: its clone's .tron/config.toml needs [remote]");
  const access = await remoteAccess(o.env);
  const remote = await openRemote(repo, { name: config.remote.name, trunk: config.trunk, timeoutMs: config.remote.timeoutMs, access });
  const sandbox = await chooseSandbox(config.sandbox.mode, o.env, [stateHome(), ...credentialPaths(o.env, access)]);
  if (sandbox.notice) o.print(`tron agent: ${sandbox.notice}`);
  const workers: Partial<Record<WorkerRole, WorkerAdapter>> = { ...o.workers };
  for (const role of AGENT_ROLES) {
    if (role === 'test') continue;
    const settings = config.workers[role];
    if (!workers[role] && settings)
      workers[role] = createWorker(settings, { repo, env: o.env, sandbox: sandbox.sandbox, replyLimit: config.limits.replyBytes });
  }
  const spine = loadSpine();
  const name = `agent ${hostname()} pid ${process.pid}`;
  const queues = new Queues();
  const base: Omit<EffectContext, 'runDir' | 'input' | 'turns'> = {
    repo,
    config,
    spine,
    env: o.env,
    sandbox: sandbox.sandbox,
    clock: o.clock,
    print: o.print,
    // The engine records process notes of its own turns; an agent's pids mean nothing on the engine's host.
    note: () => undefined,
    checkouts: new CheckoutPool(),
    queues,
    workers,
    remote,
  };
  const stop = new AbortController();
  o.stop?.addEventListener('abort', () => stop.abort());
  if (o.signals) {
    for (const s of ['SIGINT', 'SIGTERM'] as const) process.once(s, () => stop.abort());
  }
  const heartbeatMs = config.cluster?.heartbeatMs ?? 2000;
  // An agent serves exactly the repository of its clone: the queue gives it no other's jobs.
  const repository = repositoryName(repo, config.cluster, config.remote?.name);
  let control: AgentControl | undefined;
  let caller: Caller | undefined;
  // What a start makes: the pool, the engine's asks of its turns, and a connection that watches the database.
  const startPool = () =>
    untilSchema(o.clock, stop.signal, heartbeatMs, o.print, async () => {
      // A queue a newer tron migrated is refused, as an engine refuses it: upgrade this host first.
      const watch = await connect(url);
      try {
        const version = await checkQueueVersion(watch, url);
        // A queue an older tron made: wait for this version's engine to migrate it (it reads a turn's output as it comes).
        if (version < AGENT_SCHEMA_VERSION) throw Object.assign(new Error(`the queue is at version ${version}`), { code: OLDER_QUEUE });
        // The engine's asks of the turns held here (stop, probe), and their notes (engine/queue/agent-control.ts).
        control ??= await AgentControl.open(url, name, heartbeatMs, o.clock, o.print, () => caller);
        const held = control;
        const workers = await startWorkers({
          url,
          repository,
          roles,
          slots,
          agent: name,
          heartbeatMs,
          clock: o.clock,
          onRegistered: (c) => {
            caller = c;
          },
          onClaimed: (key, c) => o.print(`tron agent: ${c.kind} ${blockOf(c)} (job ${key.seq}, attempt ${c.attempt})`),
          onStale: (key, attempt) =>
            o.print(`tron agent: the result of job ${key.seq} attempt ${attempt} was refused: the job was given to another attempt`),
          run: (claimed, key) =>
            claimed.role === 'test'
              ? runSuiteHereHeld({ ...base, remote }, claimed, key, name, held.hold(key, claimed.attempt))
              : runTurnHere({ ...base, remote }, remote, claimed, key, held.hold(key, claimed.attempt)),
        });
        return { workers, control: held, lost: watchConnection(watch, heartbeatMs, o.clock) };
      } catch (err) {
        await watch.end().catch(() => undefined);
        // A control whose connection went is opened afresh at the next try.
        if (isConnectionLost(err)) await control?.close();
        if (isConnectionLost(err)) control = undefined;
        throw err;
      }
    });
  let pool = await startPool().catch(async (err: unknown) => {
    // What could not start leaves nothing open behind it: the agent exits with the error.
    await control?.close();
    throw err;
  });
  if (!pool) {
    await control?.close();
    return 0;
  }
  o.print(
    `tron agent: ${name} claims ${roles.join(', ')} jobs of ${repository} (${slots} slot${slots === 1 ? '' : 's'}) from ${redact(url)}`,
  );
  // What a lost connection left behind is stopped beside the new pool (its running turns end as they would), and awaited at exit.
  const leaving: Promise<void>[] = [];
  const stopped = new Promise<void>((r) => stop.signal.addEventListener('abort', () => r()));
  while (pool && !stop.signal.aborted) {
    const reason = await Promise.race([pool.lost, stopped.then(() => undefined)]);
    if (reason === undefined) break;
    // The database restarted, or the connection dropped: said once, then connected again with backoff; the agent goes on.
    const gone = pool;
    pool = undefined;
    control = undefined;
    o.print(`tron agent: the database at ${redact(url)} went away (${reason}); reconnecting`);
    pool = await reconnecting(o.clock, stop.signal, () => startPool());
    // The old pool goes once the database is back: stopped at once, its pool's clients could still report the break with no one listening.
    leaving.push(gone.workers.stop().then(() => gone.control.close()));
    if (pool) o.print(`tron agent: the database at ${redact(url)} is back; ${name} claims again`);
  }
  await pool?.workers.stop();
  await pool?.control.close();
  await Promise.all(leaving);
  return 0;
}

/**
 * Resolves with the reason once `client`'s connection ends: the server closed it (a restart,
 * a terminated backend) or a look every `everyMs` found no answer within the lapse (a network
 * that dropped silently). The client is ended then.
 */
function watchConnection(client: pg.Client, everyMs: number, clock: Clock): Promise<string> {
  return new Promise<string>((resolve) => {
    let done = false;
    const end = (reason: string) => {
      if (done) return;
      done = true;
      stopLooking();
      void client.end().catch(() => undefined);
      resolve(reason);
    };
    client.on('error', (err: Error) => end(err.message));
    client.on('end', () => end('the connection ended'));
    const lapseMs = Math.max(5000, 3 * everyMs);
    const stopLooking = clock.every(everyMs, () => {
      // A look unanswered keeps the agent alive until its lapse says so.
      const lapsed = clock.after(lapseMs, () => end(`no answer within ${lapseMs} ms`), { keepAlive: true });
      client.query('select 1').then(
        () => lapsed(),
        (err: Error) => {
          lapsed();
          end(err.message);
        },
      );
    });
  });
}

/** Tries `start` with backoff (a quarter second, doubling to five) while the database cannot be reached; undefined once stopped. */
async function reconnecting<T>(clock: Clock, stop: AbortSignal, start: () => Promise<T | undefined>): Promise<T | undefined> {
  for (let waitMs = 250; ; waitMs = Math.min(5000, waitMs * 2)) {
    // The agent waits on this alone: it keeps the process alive.
    await sleep(clock, waitMs, { keepAlive: true, signal: stop });
    if (stop.aborted) return undefined;
    try {
      return await start();
    } catch (err) {
      if (!isConnectionLost(err)) throw err;
    }
  }
}

/**
 * A test job, held as a turn is: an attempt that no longer holds its job (its engine lost the
 * lease, and the new leader dropped the job; or the job was given to another) has its test
 * processes ended at this agent's next look, rather than run on to its timeout.
 */
async function runSuiteHereHeld(
  base: Parameters<typeof runSuiteHere>[0],
  claimed: Claimed,
  key: JobKey,
  name: string,
  held: HeldTurn,
): Promise<JobResult> {
  const stop = held.turns.start(`test ${key.seq}`, `test ${key.seq}`, 0);
  try {
    return await runSuiteHere(base, claimed, key, name, stop);
  } finally {
    held.turns.end(`test ${key.seq}`, 0);
    held.release();
  }
}

/** How often a running turn's new output is sent to the engine. */
const OUTPUT_EVERY_MS = 1000;

/** PostgreSQL's words for a schema not made yet: no such function, table or schema. */
const NO_SCHEMA = new Set(['42883', '42P01', '3F000']);
/** A queue made by an older tron, before pools registered (pg-job-scope.ts): the engine of this version migrates it. */
const OLDER_QUEUE = 'queue-older';

/**
 * Starts the pool once the queue's schema exists: an agent may start before any engine
 * made it (the engine's role migrates; an agent's may not). Undefined when stopped meanwhile.
 */
async function untilSchema<T>(
  clock: Clock,
  stop: AbortSignal,
  everyMs: number,
  print: (line: string) => void,
  start: () => Promise<T>,
): Promise<T | undefined> {
  let said = false;
  for (;;) {
    if (stop.aborted) return undefined;
    try {
      return await start();
    } catch (err) {
      const code = String((err as { code?: unknown }).code);
      if (!NO_SCHEMA.has(code) && code !== OLDER_QUEUE) throw err;
      if (!said)
        print(
          code === OLDER_QUEUE
            ? `tron agent: ${(err as Error).message}, older than this tron (${AGENT_SCHEMA_VERSION}); waiting for an engine of this tron's version to migrate it`
            : "tron agent: the database has no job queue yet; waiting for an engine's first start to make it",
        );
      said = true;
      await sleep(clock, everyMs, { keepAlive: true, signal: stop });
    }
  }
}

function blockOf(c: Claimed): string {
  const r = c.request as { decision?: { block?: string }; block?: string; sha?: string } | undefined;
  return r?.decision?.block ?? (r?.block ? `${r.block} at ${r.sha?.slice(0, 12)}` : '?');
}

/**
 * One turn on this host: the remote's trunk and the block's work fetched at their exact
 * shas, a builder's worktree made where the work stands, the turn run by the shared
 * effect, a builder's new commits pushed back by lease. Its inputs: the usage it recorded,
 * then the reply.
 */
async function runTurnHere(
  base: Omit<EffectContext, 'runDir' | 'input' | 'turns'> & { remote: Remote },
  remote: Remote,
  claimed: Claimed,
  key: JobKey,
  held: HeldTurn,
): Promise<JobResult> {
  try {
    return await runHeldTurn(base, remote, claimed, key, held);
  } finally {
    // The turn's notes are recorded before its result: the engine reads them to the last when the result comes.
    await held.flushed();
    held.release();
  }
}

async function runHeldTurn(
  base: Omit<EffectContext, 'runDir' | 'input' | 'turns'> & { remote: Remote },
  remote: Remote,
  claimed: Claimed,
  key: JobKey,
  held: HeldTurn,
): Promise<JobResult> {
  const r = claimed.request as TurnRequest;
  const e = r.decision;
  const refused = refusedJobNames(key, { block: e?.block });
  if (refused) return { ok: false, error: { message: refused } };
  const inputs: EventBody[] = [];
  held.note({ kind: 'started' });
  // The turn's logs and transcript: inside this clone's git dir, out of every checkout's way.
  const runDir = join(base.repo, '.git', 'tron-agent', key.run);
  mkdirSync(runDir, { recursive: true });
  const fx: EffectContext = {
    ...base,
    runDir,
    // Usage goes with the result; a liveness timer's input has no engine here (the adapter's own timeout stands).
    input: (body) => {
      if (body.type === 'usage.recorded') inputs.push(body);
    },
    // Stopped by the engine's asks; its process notes go to the engine through the database.
    turns: held.turns,
    note: (body) => {
      if (body.type === 'worker.spawned') held.note({ kind: 'spawned', pid: body.pid, start_time: body.start_time });
      if (body.type === 'worker.exited') held.note({ kind: 'exited', pid: body.pid, code: body.code, signal: body.signal });
      return undefined;
    },
  };
  // An overrun turn is probed here, by the same effect the engine runs for its own turns.
  held.probeWith((p) => probe.run(fx, p) as Promise<EventBody>);
  const [work, tracking] = workRefs(e.block);
  const steps: Record<string, number> = {};
  let since = performance.now();
  const step = (name: string) => {
    const now = performance.now();
    steps[name] = Math.round(now - since);
    since = now;
  };
  try {
    // What this clone holds already is not fetched again: a reviewer reads two commits, the
    // sha under review and its base (the diffstat's); a turn's trunk is where the engine
    // left it when it decided (a merge turn fetches it: it rebases onto the remote's). The
    // fetches go in one round trip, or at once (a turn waits for the longer, not their sum).
    // A builder's challenge is about the sha the engine holds (its facts' head): the work
    // ref's value when the engine last fetched it, so a clone that holds it starts there and
    // pushes by lease against it — were the ref moved meanwhile, the push is refused.
    const has = async (c?: string) => c !== undefined && (await git.revParse(base.repo, c)) !== undefined;
    const reviewing = e.role === 'reviewer' && r.sha !== undefined;
    const challenged = e.role === 'builder' && e.kind === 'challenge' && r.sha !== undefined;
    const [haveTrunk, haveWork] = reviewing
      ? await Promise.all([has(r.base), has(r.sha)])
      : await Promise.all([e.phase !== 'merge' && has(r.trunk), challenged && has(r.sha)]);
    // Every block's work comes along: this clone's next challenge, review or test, of any block, finds its sha here.
    const inClone = (sha: string | undefined) => ({ ok: true as const, sha });
    const [trunk, fetched] =
      !haveTrunk && !haveWork
        ? await fetchTrunkAndWork(base.repo, remote, { prefix: WORK_PREFIX, block: e.block, into: tracking }).then(
            (f) => [f.trunk, f.work] as const,
          )
        : await Promise.all([
            haveTrunk ? inClone(reviewing ? undefined : r.trunk) : fetchTrunk(base.repo, remote),
            haveWork ? inClone(challenged ? r.sha : undefined) : fetchRef(base.repo, remote, work, tracking, [ALL_WORK_REFS]),
          ]);
    if (!trunk.ok) throw new Error(`cannot fetch ${remote.trunk} from ${remote.name}: ${trunk.message}`);
    if (!fetched.ok) throw new Error(`cannot fetch ${work} from ${remote.name}: ${fetched.message}`);
    step('fetch');
    // This clone's trunk is the engine's (or the remote's, fetched): a merge turn rebases onto it.
    const sha = trunk.sha;
    if (sha && (await git.revParse(base.repo, `refs/heads/${remote.trunk}`)) !== sha)
      await base.queues.main.run(() => gitOut(base.repo, ['reset', '--hard', '--quiet', sha]));
    step('trunk');
    let start: string | undefined;
    if (e.role === 'builder') {
      const from = r.base ?? trunk.sha;
      if (!from) throw new Error(`the remote has no ${remote.trunk} to build ${e.block} on`);
      if (!(await git.revParse(base.repo, from)))
        throw new Error(
          `${remote.name} does not hold ${e.block}'s base ${from.slice(0, 12)}: push ${remote.trunk} to ${remote.name} before starting (agents build on the remote's trunk)`,
        );
      // The block's work so far, when it was built on this base; else the base (a new attempt, or the first turn).
      start = fetched.sha && (await git.isAncestor(base.repo, from, fetched.sha)) ? fetched.sha : from;
      await base.queues.worktrees.run(() => freshWorktree(base.repo, e.block, start!));
    } else if (r.sha && !(await git.revParse(base.repo, r.sha))) {
      throw new Error(`the remote's ${work} does not hold ${r.sha}, the sha to review`);
    }
    step('worktree');
    // What the turn prints goes to the engine as it comes (`tron logs -f` there follows it), and its end with the result.
    const file = turnLogPath(runDir, e.block, e.session, e.turn);
    const following = followOutput(file, (offset, text) => held.note({ kind: 'output', offset, text }), OUTPUT_EVERY_MS, base.clock);
    let result: JobResult;
    try {
      result = await runJob(fx, claimed.kind, r);
    } finally {
      following.stop();
    }
    step('turn');
    const { text: output, from: outputAt } = tailOf(file, AGENT_OUTPUT_BYTES);
    // A stopped builder's work is not pushed: the engine decides where its next turn starts.
    if (!result.ok || e.role !== 'builder' || held.stopped !== undefined)
      return result.ok ? { ok: true, inputs: [...inputs, ...result.inputs], steps, output, outputAt } : result;
    const head = await git.revParse(base.repo, `refs/heads/tron/${e.block}`);
    if (head && head !== fetched.sha) {
      const pushed = await pushRef(base.repo, remote, work, head, fetched.sha);
      if (!pushed.ok) throw new Error(`cannot push ${e.block}'s work to ${remote.name} ${work}: ${pushed.message}`);
    }
    step('push');
    return { ok: true, inputs: [...inputs, ...result.inputs], steps, output, outputAt, ...(head ? { work: head } : {}) };
  } catch (err) {
    // What fails on this host fails the turn, decided like any failed turn.
    const detail = `the turn could not be carried out on ${hostname()}: ${errorLine(err)}`;
    return {
      ok: true,
      inputs: [
        ...inputs,
        { type: 'reply.received', block: e.block, role: e.role, session: e.session, turn: e.turn, ok: false, failure: 'crash', detail },
      ],
    };
  }
}

/**
 * The block's worktree in this clone, on `tron/<id>` at `sha`: whatever was there from an
 * earlier job goes — reset and cleaned where it is sound (the agent built the block: its
 * next jobs come here), else removed and made again.
 */
async function freshWorktree(repo: string, block: string, sha: string): Promise<void> {
  if (await git.reuseBuildWorktree(repo, block, sha)) return;
  const path = git.worktreePath(repo, block);
  if (existsSync(path)) await git.removeWorktree(repo, path);
  const branch = `tron/${block}`;
  const at = await git.revParse(repo, `refs/heads/${branch}`);
  if (at) await git.deleteBranch(repo, branch, at);
  await git.createWorktree(repo, { id: block, base: sha });
}
