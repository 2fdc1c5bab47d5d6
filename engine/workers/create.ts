/** Builds the adapter a `[workers.<role>]` table asks for. */
import type { WorkerAdapter } from './adapter.ts';
import type { WorkerSettings } from '../project/worker-settings.ts';
import { createCommandWorker } from './command.ts';
import { createOpenAIWorker } from './openai/agent.ts';
import { createSimWorker } from './sim.ts';
import type { Sandbox } from './sandbox.ts';

export function createWorker(
  settings: WorkerSettings,
  deps: { repo: string; env: Record<string, string | undefined>; sandbox?: Sandbox; replyLimit?: number },
): WorkerAdapter {
  const sandbox = deps.sandbox ? { sandbox: deps.sandbox } : {};
  switch (settings.adapter) {
    case 'openai':
      return createOpenAIWorker(settings, { env: deps.env, ...sandbox });
    case 'command':
      return createCommandWorker(settings, { env: deps.env, ...sandbox, ...(deps.replyLimit ? { replyLimit: deps.replyLimit } : {}) });
    case 'sim':
      return createSimWorker(settings, { repo: deps.repo, env: deps.env, ...sandbox });
  }
}
