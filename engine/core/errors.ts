/**
 * Every user-facing failure carries a stable code, the place at fault and the fix.
 * A `Problem` is one finding; an `InputError` carries all of them at once, so the CLI
 * can print every problem together and exit 2 without a stack trace.
 */
import { coded, type FaultCode, type InputCode } from './problems.ts';

export interface Problem {
  /** Stable code, e.g. `TRON_CYCLE`: a row of PROBLEMS. The same code appears in events and docs/ERRORS.md. */
  code: InputCode;
  /** File, and field or line where known: `.tron/blocks/b.md: depends_on`. */
  path: string;
  /** What is wrong, then what to do about it. */
  message: string;
}

/** A user mistake: exit status 2, nothing changed. */
export class InputError extends Error {
  readonly problems: Problem[];
  constructor(problems: Problem[]) {
    super(problems.map(formatProblem).join('\n'));
    this.name = 'InputError';
    this.problems = problems;
  }
}

export function formatProblem(p: Problem): string {
  return `${p.code}: ${p.path}: ${p.message}`;
}

/** Throws one InputError carrying every problem, if there are any. */
/**
 * A failure of the engine or what it stands on (not a user mistake: exit 1), with a stable
 * code: its message is the coded line (`TRON_…: …`) the CLI prints as it is, its `code`
 * the code, its `name` its class's. The one shape of tron's fault errors: each is a
 * subclass that says what failed and what to do.
 */
export class FaultError<C extends FaultCode = FaultCode> extends Error {
  constructor(
    readonly code: C,
    text: string,
  ) {
    super(coded(code, text));
    this.name = new.target.name;
  }
}

export function throwIfProblems(problems: Problem[]): void {
  if (problems.length > 0) throw new InputError(problems);
}
