/**
 * How the simulated world answers each effect a decision asks for — a worker turn, the
 * facts, the lane's rebase, a test run, a landing, a page — the way the real effects
 * could, chosen at the named points of choices.ts. Each answer is the input event the
 * real effect would report, and changes the world's git as the real one would.
 */
import type { EventBody, EventOf, TronEvent } from '../../engine/core/events.ts';
import { Failure, linear } from './invariants.ts';
import type { Item, SimWorld } from './sim.ts';
import type { SimEffect } from './reactions.ts';

/** What one worker turn costs, when budgets are on. */
const TURN_USD = 0.05;

export function execute(sim: SimWorld, item: Item): EventBody[] {
  if (item.kind === 'follow') return follow(sim, item.d, item.found);
  // A late result is the cluster's to refuse or record (cluster.ts): a run without one makes none.
  if (item.kind === 'late') throw new Error('a late job result outside a cluster run');
  if (item.kind === 'answer') {
    // An operator who answers has looked: what stood in the block's namespace is cleared.
    sim.git.planted.delete(item.block);
    return [
      {
        type: 'operator.answered',
        block: item.block,
        word: item.word,
        payload: item.word === 'RETRY' ? { guidance: 'try again' } : { reason: 'not worth it' },
        file: `answer-${sim.step}.json`,
        trunk_sha: sim.git.trunk,
        written_at: sim.ts,
      },
    ];
  }
  if (item.kind === 'aborted') {
    const d = item.d;
    return [
      {
        type: 'reply.received',
        block: d.block,
        role: d.role,
        session: d.session,
        turn: d.turn,
        ok: false,
        failure: 'aborted',
        detail: 'stopped',
      },
    ];
  }
  // no-effect-without-intent: the decision that asked for this effect is in the log.
  const logged = item.run === sim.runNo ? sim.log[item.seq - 1] : undefined;
  if (logged !== item.d) {
    throw new Failure('intent-before-effect', `an effect of ${item.d.type} (seq ${item.seq}) started with no intent in the current log`);
  }
  // Every decision the world queues is one REACTIONS marks `effect`: each has its case below.
  const d = item.d as Extract<TronEvent, { type: SimEffect }>;
  switch (d.type) {
    case 'worktree.requested':
      return [worktree(sim, d)];
    case 'block.dispatched':
      return turn(sim, item, d);
    case 'facts.requested':
      return [facts(sim, d)];
    case 'lane.stacked':
      return sim.git.remote ? fetchThenRebase(sim, d) : [rebase(sim, d)];
    case 'candidate.requested':
    case 'bisect.step':
      return [testCandidate(sim, d)];
    case 'land.intent':
      return sim.git.remote ? push(sim, d) : land(sim, d);
    case 'remote.retry':
      return [{ type: 'remote.waited', stack: d.stack, attempt: d.attempt }];
    case 'pr.requested':
      return [askForge(sim, d)];
    case 'pr.wait':
      return [{ type: 'pr.waited', stack: d.stack, attempt: d.attempt }];
    case 'test.requested': {
      const run = testRun(sim, d.sha);
      return [{ type: 'trunk.tested', block: d.block, sha: d.sha, ok: run.exit === 0, tests: run }];
    }
    case 'wrap.requested':
      sim.git.worktrees.delete(d.block);
      sim.git.branches.delete(d.block);
      return [{ type: 'block.wrapped', block: d.block, summary: d.summary }];
    case 'escalation.raised': {
      const how = sim.pick('operator');
      const word = sim.pick('answer');
      if (how === 'never') sim.unanswered.add(d.block);
      else
        sim.items.push({
          kind: 'answer',
          block: d.block,
          word,
          after: how === 'late' ? sim.step + 20 + sim.c.amount('delay', 200) : 0,
        });
      return [{ type: 'page.sent', block: d.block, page: `page-${sim.step}`, reason: d.detail }];
    }
    case 'worker.overran': {
      const t = sim.turnItem(d.session, d.turn);
      const alive = t !== undefined && !t.silent;
      return [{ type: 'worker.probed', block: d.block, session: d.session, turn: d.turn, alive, signs: alive ? ['output'] : [] }];
    }
    default: {
      const unanswered: never = d;
      throw new Error(`no answer for ${(unanswered as TronEvent).type}`);
    }
  }
}

export function worktree(sim: SimWorld, d: EventOf<'worktree.requested'>): EventBody {
  if (sim.git.planted.has(d.block)) {
    const detail = `fatal: cannot lock ref 'refs/heads/tron/${d.block}': 'refs/heads/tron/${d.block}/x' exists; cannot create 'refs/heads/tron/${d.block}'`;
    return { type: 'worktree.failed', block: d.block, attempt: d.attempt, detail };
  }
  const old = sim.git.branches.get(d.block);
  const orphan = old !== undefined && !sim.git.onTrunk.has(old) ? `orphan/${d.block}-${d.attempt}` : undefined;
  sim.git.branches.set(d.block, d.base);
  sim.git.worktrees.set(d.block, { dirty: false });
  return {
    type: 'worktree.ready',
    block: d.block,
    attempt: d.attempt,
    base: d.base,
    path: `.tron/worktrees/${d.block}`,
    ...(orphan ? { orphan } : {}),
  };
}

export function turn(sim: SimWorld, item: Extract<Item, { kind: 'effect' }>, d: EventOf<'block.dispatched'>): EventBody[] {
  const kind = d.kind === 'restate' ? d.restating! : d.kind;
  if (item.stage === 0) {
    item.stage = 1;
    // How this turn will go is chosen when it first runs.
    const restated = d.kind === 'restate' ? sim.pick('restate') : undefined;
    const outcome =
      restated === undefined
        ? outcomeOf(sim, kind)
        : restated === 'restated'
          ? nominalOf(kind)
          : restated === 'fails'
            ? 'fails'
            : 'garbage';
    (item as { outcome?: string }).outcome = outcome;
    if (outcome === 'hangs') item.hang = 1 + sim.c.amount('hang-length', sim.state.liveness.maxExtensions + 1);
    if (outcome === 'silent') item.silent = true;
    const spends = sim.cfg.budgets.block_usd !== undefined || sim.cfg.budgets.run_usd !== undefined;
    if (spends) {
      sim.items.push(item);
      const usd = outcome === 'overspends' ? 5 : TURN_USD;
      return [
        {
          type: 'usage.recorded',
          block: d.block,
          role: d.role,
          session: d.session,
          turn: d.turn,
          model: 'sim',
          input_tokens: 1000,
          cached_tokens: 0,
          output_tokens: 100,
          cost_usd: usd,
        },
      ];
    }
  }
  if (item.hang > 0 || item.silent) {
    item.paused = true;
    sim.items.push(item);
    return [{ type: 'timer.fired', block: d.block, session: d.session, turn: d.turn, timer: 'overrun', elapsed_ms: 3_600_000 }];
  }
  return [reply(sim, d, kind, (item as { outcome?: string }).outcome!)];
}

export function outcomeOf(sim: SimWorld, kind: string): string {
  switch (kind) {
    case 'build':
      return sim.pick('build');
    case 'challenge':
      return sim.pick('challenge');
    case 'review':
      return sim.pick('review');
    case 'merge':
      return sim.pick('merge');
    case 'architect':
      return sim.pick('architect');
    default:
      return nominalOf(kind);
  }
}

export function reply(sim: SimWorld, d: EventOf<'block.dispatched'>, kind: string, outcome: string): EventBody {
  const base = { type: 'reply.received' as const, block: d.block, role: d.role, session: d.session, turn: d.turn };
  const ok = (reply: string): EventBody => ({ ...base, ok: true, reply: `Working on it.\n${reply}\n` });
  const git = sim.git;
  const head = git.branches.get(d.block) ?? git.trunk;
  const work = (red: boolean, engine: boolean) => {
    const sha = git.commit({ parent: head, patch: `patch-${d.block}-${sim.step}`, red, engine });
    git.branches.set(d.block, sha);
  };
  if (kind === 'build') git.worktrees.set(d.block, { dirty: false });
  if (outcome === 'overspends' || outcome === 'hangs' || outcome === 'silent') outcome = nominalOf(kind);
  switch (outcome) {
    case 'done':
      if (kind === 'build') {
        work(false, false);
        return ok('>>DONE {"summary":"did it"}');
      }
      return ok(nominalReply(kind));
    case 'done-red-tests':
      work(true, false);
      return ok('>>DONE {"summary":"did it"}');
    case 'done-no-commits':
      return ok('>>DONE');
    case 'done-uncommitted':
      git.worktrees.set(d.block, { dirty: true });
      return ok('>>DONE');
    case 'done-engine-files':
      work(false, true);
      return ok('>>DONE');
    case 'blocked':
      return ok('>>BLOCKED {"reason":"the API key is missing"}');
    case 'garbage':
      return ok('I believe this is finished now.');
    case 'two-lines':
      return ok('>>DONE\n>>BLOCKED {"reason":"or not"}');
    case 'illegal-word':
      return ok('>>APPROVE');
    case 'fails':
      return { ...base, ok: false, failure: 'exit', detail: 'exited 1: Segmentation fault' };
    case 'fails-auth':
      return { ...base, ok: false, failure: 'exit', detail: 'Not logged in · Please run /login', cause: 'auth' };
    case 'no-evidence':
      return ok('>>CONFIRMED {"evidence":{"c1":"see the test"}}');
    case 'changes':
      return ok('>>CHANGES {"notes":"name things better"}');
    case 'merged-without-rebase':
      return ok('>>MERGED');
    case 'page':
      return ok('>>PAGE {"reason":"a person should look"}');
    case 'abandon':
      return ok('>>ABANDON {"reason":"cannot be done"}');
    default:
      if (kind === 'merge') {
        const sha = git.commit({ parent: git.trunk, patch: git.commits.get(head)?.patch ?? 'merged', red: false, engine: false });
        git.branches.set(d.block, sha);
      }
      return ok(nominalReply(kind));
  }
}

export function testRun(sim: SimWorld, sha: string): EventOf<'trunk.tested'>['tests'] {
  const how = sim.pick('test');
  const green = sim.git.greenTree(sha) && how === 'as-tree';
  if (green) sim.git.green.add(sha);
  if (how === 'timeout') return { exit: null, timed_out: true, log: 'tests.log', tail: 'killed after 10m' };
  return { exit: green ? 0 : 1, timed_out: false, log: 'tests.log', tail: green ? 'ok' : 'not ok 1 - it works' };
}

export function facts(sim: SimWorld, d: EventOf<'facts.requested'>): EventBody {
  const git = sim.git;
  const head = git.branches.get(d.block) ?? d.base;
  const wt = git.worktrees.get(d.block);
  const tests = testRun(sim, head);
  return {
    type: 'facts.observed',
    block: d.block,
    purpose: d.purpose,
    base: d.base,
    head,
    commits: git.commitsOver(d.base, head),
    trunk_sha: git.trunk,
    main_status: '',
    clean: !wt?.dirty,
    status: wt?.dirty ? ' M src/half-done.js' : '',
    tests,
    patch_id: head === d.base ? '' : git.commits.get(head)!.patch,
    fast_forward: git.isAncestor(git.trunk, head),
    engine_diff: git.touchesEngine(head) ? ['M .tron/config.toml'] : [],
  };
}

export function rebase(sim: SimWorld, d: EventOf<'lane.stacked'>): EventBody {
  const git = sim.git;
  if (git.trunk !== d.trunk_sha) return { type: 'rebase.done', stack: d.stack, trunk_sha: git.trunk, results: [] };
  let top = d.trunk_sha;
  const results: EventOf<'rebase.done'>['results'] = [];
  for (const b of d.blocks) {
    const own = git.commits.get(b.sha)!;
    if (git.isAncestor(top, b.sha)) {
      results.push({ block: b.block, outcome: 'fast_forward', onto: top, sha: b.sha, patch_before: own.patch, patch_after: own.patch });
      top = b.sha;
      continue;
    }
    const how = sim.pick('rebase');
    if (how === 'conflict') {
      results.push({ block: b.block, outcome: 'conflict', onto: top, patch_before: own.patch, files: ['src/shared.js'] });
      continue;
    }
    const patch = how === 'changed' ? `${own.patch}'` : own.patch;
    const sha = git.commit({
      parent: top,
      patch,
      // Red when its own tree was, when the block below it is (the stack holds both), or in a clash only the stack shows.
      red: !git.greenTree(b.sha) || !git.greenTree(top) || how === 'red-in-stack',
      engine: git.touchesEngine(b.sha),
    });
    results.push({
      block: b.block,
      outcome: how === 'changed' ? 'changed' : 'clean',
      onto: top,
      sha,
      patch_before: own.patch,
      patch_after: patch,
    });
    if (how !== 'changed') top = sha;
  }
  return { type: 'rebase.done', stack: d.stack, trunk_sha: git.trunk, results };
}

export function testCandidate(sim: SimWorld, d: EventOf<'candidate.requested' | 'bisect.step'>): EventBody {
  const tests = testRun(sim, d.sha);
  return { type: 'candidate.tested', stack: d.stack, sha: d.sha, blocks: d.blocks, ok: tests.exit === 0, tests };
}

/** The one ref transaction, compare-and-swap on trunk; git refuses a landed ref that exists. */
export function land(sim: SimWorld, d: EventOf<'land.intent'>): EventBody[] {
  const git = sim.git;
  const ids = d.blocks.map((b) => b.block);
  if (git.trunk !== d.from)
    return [{ type: 'land.refused', stack: d.stack, blocks: ids, actual: git.trunk, detail: `trunk is at ${git.trunk}, not ${d.from}` }];
  if (ids.some((id) => git.landed.has(id))) {
    return [
      {
        type: 'land.refused',
        stack: d.stack,
        blocks: ids,
        actual: git.trunk,
        detail: `a landed ref of ${ids.join(', ')} already exists`,
      },
    ];
  }
  landing(sim, d, git.trunk, 'the engine');
  landLocally(sim, d);
  return d.blocks.map((b) => ({ type: 'block.landed', block: b.block, sha: b.sha, from: d.from, top: d.sha }));
}

/** trunk-tested-green, trunk-linear, no-landing-past-dependency: checked as a trunk (local or the remote's) moves to `d.sha` from `from`. */
function landing(sim: SimWorld, d: EventOf<'land.intent'>, from: string, by: string): void {
  const git = sim.git;
  const ids = d.blocks.map((b) => b.block);
  if (!git.green.has(d.sha)) {
    throw new Failure(
      'trunk-tested-green',
      `trunk moved to ${d.sha.slice(-8)} (${ids.join(', ')}, tested: ${d.tested}), which no test run found green`,
    );
  }
  if (sim.cfg.pr && !git.forge!.green.has(d.sha)) {
    throw new Failure(
      'trunk-checks-green',
      `in PR mode trunk moved to ${d.sha.slice(-8)} (${ids.join(', ')}), on which the forge never reported every required hosted check green`,
    );
  }
  linear(sim, d.sha, by, from);
  for (const [i, id] of ids.entries()) {
    const info = sim.cfg.blocks.find((b) => b.id === id)!;
    for (const dep of info.depends_on) {
      if (git.landed.has(dep) || git.remote?.landed.has(dep) || ids.slice(0, i).includes(dep)) continue;
      const phase = sim.state.blocks.get(dep)?.phase ?? '?';
      throw new Failure('no-landing-past-dependency', `${id} landed while its dependency ${dep} had not (it is ${phase})`);
    }
  }
}

/** Local trunk, the landed refs and the branches move to the landing (after the remote took it, with one). */
export function landLocally(sim: SimWorld, d: Pick<EventOf<'land.intent'>, 'sha' | 'blocks'>): void {
  const git = sim.git;
  git.moveTrunk(d.sha);
  for (const b of d.blocks) {
    git.landed.set(b.block, b.sha);
    git.branches.set(b.block, b.sha);
    sim.landings.push(b.block);
  }
}

// ---- the remote ([remote]) ----

/** Before a stack: the remote's trunk is fetched, and local trunk follows it when it moved ahead (remote.ts fetchBeforeStack). */
export function fetchThenRebase(sim: SimWorld, d: EventOf<'lane.stacked'>): EventBody[] {
  const git = sim.git;
  const remote = git.remote!;
  if (git.trunk !== d.trunk_sha) return [rebase(sim, d)];
  if (sim.pick('fetch') === 'unreachable') return [remoteFailed(d.stack, 'fetch', 'transient', 'unreachable', 1), rebase(sim, d)];
  if (remote.trunk === d.trunk_sha) return [rebase(sim, d)];
  git.moveTrunk(remote.trunk);
  return [{ type: 'remote.fetched', stack: d.stack, from: d.trunk_sha, sha: remote.trunk }, rebase(sim, { ...d, trunk_sha: remote.trunk })];
}

/**
 * A landing with a remote: one atomic push, leased on the remote's trunk (remote.ts
 * landOnRemote). Accepted, local trunk follows as its own step (`follow`), so the engine
 * can die between the two; a lease refused reads the remote: our landing already there
 * (an answer lost) counts as pushed, a trunk moved ahead by a teammate is followed and
 * restacked, anything else is refused.
 */
export function push(sim: SimWorld, d: EventOf<'land.intent'>): EventBody[] {
  const git = sim.git;
  const remote = git.remote!;
  const ids = d.blocks.map((b) => b.block);
  const attempt = d.attempt ?? 1;
  if (git.trunk !== d.from)
    return [{ type: 'land.refused', stack: d.stack, blocks: ids, actual: git.trunk, detail: `trunk is at ${git.trunk}, not ${d.from}` }];
  const how = sim.pick('push');
  if (how === 'unreachable') return [remoteFailed(d.stack, 'push', 'transient', 'unreachable', attempt)];
  // git checks the leases against what the remote advertises before it sends anything: a
  // hook runs (and may decline) only for a push whose leases hold.
  const leaseHolds = remote.trunk === d.from && !ids.some((id) => remote.landed.has(id));
  if (leaseHolds && how === 'refused') return [remoteFailed(d.stack, 'push', 'refused', 'hook', attempt)];
  if (leaseHolds) {
    landing(sim, d, remote.trunk, 'the engine (a push)');
    remote.trunk = d.sha;
    for (const b of d.blocks) remote.landed.set(b.block, b.sha);
    // The push went through, and its answer never came back: the engine tries again.
    if (how === 'answer-lost') return [remoteFailed(d.stack, 'push', 'transient', 'timeout', attempt)];
    sim.items.push({ kind: 'follow', d, found: false });
    return [];
  }
  const ours = d.blocks.every((b) => remote.landed.get(b.block) === b.sha) && git.isAncestor(d.sha, remote.trunk);
  if (ours) {
    sim.items.push({ kind: 'follow', d, found: true });
    return [];
  }
  const theirs = ids.filter((id) => remote.landed.has(id));
  if (theirs.length === 0 && git.isAncestor(d.from, remote.trunk)) {
    git.moveTrunk(remote.trunk);
    const detail = `the remote's main moved from ${d.from.slice(-8)} to ${remote.trunk.slice(-8)} (someone else pushed)`;
    return [{ type: 'remote.moved', stack: d.stack, blocks: ids, from: d.from, sha: remote.trunk, detail }];
  }
  const detail =
    theirs.length > 0
      ? `the remote already has refs/tron/landed/ for ${theirs.join(', ')}, not from this landing`
      : `the remote's main is at ${remote.trunk}, which does not descend from ${d.from}`;
  return [{ type: 'land.refused', stack: d.stack, blocks: ids, actual: remote.trunk, detail }];
}

/** The remote accepted: local trunk and the landed refs follow (the local ref transaction). */
export function follow(sim: SimWorld, d: EventOf<'land.intent'>, found: boolean): EventBody[] {
  const git = sim.git;
  if (git.trunk !== d.from) {
    const ids = d.blocks.map((b) => b.block);
    return [{ type: 'land.refused', stack: d.stack, blocks: ids, actual: git.trunk, detail: `trunk is at ${git.trunk}, not ${d.from}` }];
  }
  landLocally(sim, d);
  return [
    { type: 'remote.pushed', stack: d.stack, from: d.from, sha: d.sha, blocks: d.blocks, ...(found ? { found } : {}) },
    ...d.blocks.map((b): EventBody => ({ type: 'block.landed', block: b.block, sha: b.sha, from: d.from, top: d.sha })),
  ];
}

// ---- the forge ([forge] land = "pr") ----

/**
 * One ask about a landing's pull requests (effects/pr.ts askForge): the blocks' branches
 * pushed, each block's one pull request opened or found, then the required hosted checks
 * on the landing's sha and the reviews read — or the forge fails the call, as its client
 * reports it (a rate limit with the wait it asked for, a 5xx, a token refused).
 */
export function askForge(sim: SimWorld, d: EventOf<'pr.requested'>): EventBody {
  const forge = sim.git.forge!;
  const how = sim.pick('pr');
  const failed = (kind: 'rate_limited' | 'transient' | 'auth', message: string, wait_ms?: number): EventBody => ({
    type: 'pr.failed',
    stack: d.stack,
    attempt: d.attempt,
    kind,
    ...(wait_ms !== undefined && { wait_ms }),
    message,
  });
  // As github.ts reports them: a 403 with a reset time (the wait), a 502, a 401.
  if (how === 'rate-limited')
    return failed('rate_limited', '403: API rate limit exceeded for installation ID 1', 1000 * (1 + sim.c.amount('rate-wait', 60)));
  if (how === 'transient') return failed('transient', '502: Bad Gateway');
  if (how === 'auth') return failed('auth', '401: Bad credentials');
  const top = d.blocks.at(-1)!.block;
  const pulls = d.blocks.map((b) => {
    let pull = forge.pulls.get(b.block);
    if (!pull) {
      pull = { number: forge.next };
      forge.next += 1;
      forge.pulls.set(b.block, pull);
    }
    if (how === 'closed' && b.block === top) pull.closed = 'bob: we will not take this';
    return {
      block: b.block,
      number: pull.number,
      url: `https://github.com/sim/sim/pull/${pull.number}`,
      state: pull.closed ? ('closed' as const) : ('open' as const),
      ...(pull.closed ? { words: pull.closed } : {}),
    };
  });
  // A check that has not reported on this sha stays missing for a few asks (past [forge] retries: a page).
  if (how === 'checks-missing' && !forge.missing.has(d.sha)) forge.missing.set(d.sha, 1 + sim.c.amount('checks-missing-asks', 4));
  const left = forge.missing.get(d.sha) ?? 0;
  if (left > 0) forge.missing.set(d.sha, left - 1);
  const ci =
    left > 0
      ? { name: 'ci', state: 'missing' as const }
      : how === 'checks-pending'
        ? { name: 'ci', state: 'pending' as const }
        : how === 'checks-red'
          ? {
              name: 'ci',
              state: 'failure' as const,
              text: 'not ok 3 - it works on windows',
              url: 'https://github.com/sim/sim/actions/runs/1',
            }
          : { name: 'ci', state: 'success' as const };
  const checks = [ci, { name: 'lint', state: 'success' as const }];
  if (checks.every((c) => c.state === 'success')) forge.green.add(d.sha);
  // A person's requested changes stay on the head they were given on: asked again, the forge says them again.
  if (how === 'changes-requested') forge.changes.set(d.sha, top);
  const asked = forge.changes.get(d.sha);
  return {
    type: 'pr.observed',
    stack: d.stack,
    sha: d.sha,
    attempt: d.attempt,
    pulls,
    checks,
    changes: asked === undefined ? [] : [{ block: asked, author: 'alice', notes: 'please name things better' }],
    approved: how === 'unapproved' ? [] : d.blocks.map((b) => b.block),
  };
}

function remoteFailed(stack: number, op: 'fetch' | 'push', kind: 'transient' | 'refused', reason: string, attempt: number): EventBody {
  const code = kind === 'transient' ? 'TRON_REMOTE_UNREACHABLE' : 'TRON_REMOTE_REJECTED';
  const message = reason === 'hook' ? 'origin (sim): ! [remote rejected] main (pre-receive hook declined)' : `origin (sim): ${reason}`;
  return { type: 'remote.failed', stack, op, kind, reason, code, message, attempt };
}

export function nominalOf(kind: string): string {
  return kind === 'build' ? 'done' : 'nominal';
}

export function nominalReply(kind: string): string {
  switch (kind) {
    case 'challenge':
      return '>>CONFIRMED {"evidence":{"c1":"test/works.test.js passes","c2":"test/works.test.js covers it"}}';
    case 'review':
      return '>>APPROVE';
    case 'merge':
      return '>>MERGED';
    case 'architect':
      return '>>RETRY {"guidance":"start again from trunk"}';
    default:
      return '>>DONE {"summary":"did it"}';
  }
}
