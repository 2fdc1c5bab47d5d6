/**
 * The openai worker's conversations, one JSON file per session under
 * `<runDir>/sessions/`. Every turn of a session (build, challenge, merge, probe, restate)
 * continues the same conversation, even in a new engine process, so the file is
 * rewritten atomically after every step: a crash leaves the previous whole version.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { WorkerRole } from '../../core/roles.ts';

export interface Conversation {
  v: 1;
  session: string;
  role: WorkerRole;
  messages: ChatCompletionMessageParam[];
}

export type Loaded = { ok: true; conversation: Conversation | undefined } | { ok: false; error: string };

/** Where a session's conversation lives; the id is encoded so it cannot name another path. */
export function sessionFile(runDir: string, session: string): string {
  return path.join(runDir, 'sessions', `${encodeURIComponent(session)}.json`);
}

/**
 * The stored conversation, or undefined for a new session. An unreadable file is moved
 * aside (kept for the operator) and reported, so the next turn can start afresh instead
 * of failing forever.
 */
export async function loadConversation(runDir: string, session: string): Promise<Loaded> {
  const file = sessionFile(runDir, session);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { ok: true, conversation: undefined };
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as Conversation;
    if (parsed?.v !== 1 || !Array.isArray(parsed.messages)) throw new Error('not a version 1 conversation');
    return { ok: true, conversation: { ...parsed, messages: closeOpenToolCalls(parsed.messages) } };
  } catch (error) {
    const aside = `${file}.unreadable`;
    await rename(file, aside);
    return {
      ok: false,
      error: `the conversation of session ${session} in ${file} is unreadable (${(error as Error).message}); it was moved to ${aside} and the next turn starts a new conversation`,
    };
  }
}

/** Writes the conversation whole: to a temporary file, then renamed over the old one. */
export async function saveConversation(runDir: string, conversation: Conversation): Promise<void> {
  const file = sessionFile(runDir, conversation.session);
  await mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(conversation, null, 1)}\n`);
  await rename(temp, file);
}

/**
 * A turn that died between the model's tool calls and their results leaves calls
 * unanswered, which the API rejects. Each such call gets a result saying it never ran.
 */
export function closeOpenToolCalls(messages: ChatCompletionMessageParam[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    out.push(message);
    if (message.role !== 'assistant' || !message.tool_calls?.length) continue;
    const answered = new Set<string>();
    let j = i + 1;
    for (; j < messages.length && messages[j]!.role === 'tool'; j++) {
      const reply = messages[j] as { tool_call_id: string };
      answered.add(reply.tool_call_id);
      out.push(messages[j]!);
    }
    for (const call of message.tool_calls) {
      if (!answered.has(call.id)) {
        out.push({ role: 'tool', tool_call_id: call.id, content: 'error: not run: the turn ended before this tool ran' });
      }
    }
    i = j - 1;
  }
  return out;
}
