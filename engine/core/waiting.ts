/**
 * What a block waits on, and the turn it waits for: the part of a block's state the
 * scheduling index reads (block-index.ts), apart from the rest of the state so that the
 * index and the fold (state.ts) do not import each other.
 */
import type { EventOf } from './events.ts';
import type { TurnKind } from './roles.ts';

/** A worker turn that was dispatched and has not answered yet. */
export interface PendingTurn {
  role: 'builder' | 'reviewer' | 'architect';
  session: string;
  turn: number;
  kind: TurnKind;
  phase: string;
  expect: string[];
  /** For a restate turn: the kind of the turn whose reply it restates. */
  restating?: TurnKind;
}

/** What a block is waiting for; at most one thing at a time. */
export type Waiting =
  | { on: 'slot' }
  | { on: 'worktree' }
  | { on: 'turn'; turn: PendingTurn }
  | { on: 'facts'; purpose: 'gate' | 'merge' }
  | { on: 'lane' }
  | { on: 'stack' }
  | { on: 'wrap' }
  | { on: 'operator' }
  /** A turn for a worker that is unavailable, held until the operator answers (turn.held). */
  | { on: 'worker'; held: Omit<EventOf<'turn.held'>, 'type' | 'v' | 'seq' | 'ts'> }
  | { on: 'reissue' }
  | { on: 'nothing' };
