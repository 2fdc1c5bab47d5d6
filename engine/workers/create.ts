/** Builds the adapter a `[workers.<role>]` table asks for. */
import type { WorkerAdapter } from './adapter.ts';
import type { WorkerSettings } from './settings.ts';
import { createCommandWorker } from './command.ts';
import { createOpenAIWorker } from './openai/agent.ts';
import { createSimWorker } from './sim.ts';

export function createWorker(
  settings: WorkerSettings,
  deps: { repo: string; env: Record<string, string | undefined>; replyLimit?: number },
): WorkerAdapter {
  switch (settings.adapter) {
    case 'openai':
      return createOpenAIWorker(settings, { env: deps.env });
    case 'command':
      return createCommandWorker(settings, { env: deps.env, ...(deps.replyLimit ? { replyLimit: deps.replyLimit } : {}) });
    case 'sim':
      return createSimWorker(settings, { repo: deps.repo });
  }
}
