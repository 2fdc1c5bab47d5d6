/**
 * A job's result is read by the job's kind (docs/cluster.md, "Effects as jobs"): whoever ran
 * it — an agent on another host, a pool that was given the job — a result is only the
 * inputs that kind of effect can report, about exactly the decision it answers. A turn's:
 * the usage it recorded and one reply, of its block, role, session and turn; a test run's:
 * its one report of the sha asked for. Anything else — an operator's answer, another
 * block's reply, a second reply — refuses the whole result, and the effect fails with the
 * reason, decided as a failed turn or test run is (the effect's `onFailure`). Before this
 * check, a forged builder result carrying `operator.answered` was signed into the log as
 * the operator's answer.
 */
import type { TronEvent } from '../core/events.ts';
import type { JobResult } from './pg-job-types.ts';

type Done = Extract<JobResult, { ok: true }>;
type Input = Record<string, unknown> & { type?: unknown };

/** The fields an input must share with its decision. */
const same = (input: Input, decision: TronEvent, fields: readonly string[]): string | undefined => {
  const d = decision as unknown as Record<string, unknown>;
  const off = fields.find((f) => input[f] !== d[f]);
  return off === undefined
    ? undefined
    : `its ${String(input.type)} has ${off} ${JSON.stringify(input[off])}, not ${JSON.stringify(d[off])}`;
};

/** One input of `type` about the decision (its `fields` alike), and nothing else. */
const one =
  (type: string, fields: readonly string[]) =>
  (decision: TronEvent, inputs: readonly Input[]): string | undefined => {
    if (inputs.length !== 1 || inputs[0]!.type !== type)
      return `a ${decision.type} job reports one ${type}, and this result holds ${describe(inputs)}`;
    return same(inputs[0]!, decision, fields);
  };

const TURN = ['block', 'role', 'session', 'turn'] as const;

/** What each queued kind may report (the effects of engine/runtime/effects/table.ts the queue carries). */
const READERS: Record<string, (decision: TronEvent, inputs: readonly Input[]) => string | undefined> = {
  // A turn: the usage it recorded (an agent's; the engine's own pool records usage as it comes), then exactly one reply.
  'block.dispatched': (decision, inputs) => {
    const foreign = inputs.find((i) => i.type !== 'usage.recorded' && i.type !== 'reply.received');
    if (foreign) return `a turn reports its usage and its reply, and this result holds ${describe([foreign])}`;
    const replies = inputs.filter((i) => i.type === 'reply.received').length;
    if (replies !== 1) return `a turn reports one reply, and this result holds ${replies}`;
    for (const input of inputs) {
      const off = same(input, decision, TURN);
      if (off) return off;
    }
    return undefined;
  },
  'facts.requested': one('facts.observed', ['block', 'purpose']),
  'candidate.requested': one('candidate.tested', ['stack', 'sha']),
  'bisect.step': one('candidate.tested', ['stack', 'sha']),
  'test.requested': one('trunk.tested', ['block', 'sha']),
  // A test run on an agent (agent-tests.ts): one report, whose shape and sha that module reads before it believes it.
  'tests.queued': (_decision, inputs) =>
    inputs.length === 1 ? undefined : `a test run reports one report, and this result holds ${inputs.length} inputs`,
};

function describe(inputs: readonly Input[]): string {
  const types = inputs.map((i) => (i && typeof i === 'object' && typeof i.type === 'string' ? i.type : 'something that is no input'));
  return types.length === 0 ? 'nothing' : types.slice(0, 4).join(', ') + (types.length > 4 ? ', …' : '');
}

/**
 * The result of `decision`'s job, as its kind may report it; an error naming what is wrong
 * (and who ran it) otherwise — the engine fails the effect with it, never appends the inputs.
 */
export function checkResult(decision: TronEvent, result: Done): Done {
  const read = READERS[decision.type];
  const inputs = Array.isArray(result.inputs) ? (result.inputs as Input[]) : undefined;
  const objects = inputs?.every((i) => i !== null && typeof i === 'object' && !Array.isArray(i));
  const fault = !read
    ? `no job of kind ${decision.type} is run on the queue`
    : !inputs || !objects
      ? 'its inputs are not a list of events'
      : read(decision, inputs);
  if (fault === undefined) return result;
  const by = result.worker ? ` from ${result.worker}${result.attempt ? ` (attempt ${result.attempt})` : ''}` : '';
  throw new Error(`the result of its job${by} was refused: ${fault}`);
}
