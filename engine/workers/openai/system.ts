/**
 * The system message that opens a new openai session: who the worker is, where it
 * stands and what its tools can do. The turn prompts (prompts/) say what to do now and
 * how to answer; this only sets the scene, so it stays the same for every turn.
 */
import type { WorkerRole } from '../../core/roles.ts';
import type { ToolName } from './tools.ts';

const PLACE: Record<WorkerRole, string> = {
  builder:
    "You are the builder. Your working directory is a git worktree on the block's own branch: implement what you are asked there, run the tests, and commit your work with git through the run tool — the engine only sees committed work. Never touch other branches.",
  reviewer:
    'You are the reviewer. Your working directory is a checkout pinned to the commit under review. You cannot change files; you may read, search and run commands such as the tests to judge the work.',
  architect:
    'You are the architect. Your working directory is the root of the repository. You cannot change files; you may read, search and run commands to understand why a block is stuck before you decide.',
};

/** The opening system message for a role with these tools. */
export function systemMessage(role: WorkerRole, tools: readonly ToolName[]): string {
  return [
    'You are a worker supervised by tron, an engine that walks blocks of work on a git repository through build, review, merge and landing.',
    PLACE[role],
    `Your tools: ${tools.join(', ')}. Paths are relative to your working directory; anything outside it is refused. Tool errors come back as results starting with "error:" — read them and adjust.`,
    'When you are done, answer with a message without tool calls: that message is your reply, and it must follow the instructions of the latest user message, including its one ">>" line.',
  ].join('\n\n');
}
