/** Builds the adapter a `[workers.<role>]` table asks for. */
import type { WorkerAdapter } from './adapter.ts';
import type { WorkerSettings } from '../project/worker-settings.ts';
import { createCommandWorker } from './command.ts';
import { createSimWorker } from './sim.ts';
import type { Sandbox } from './sandbox.ts';

export function createWorker(
  settings: WorkerSettings,
  deps: { repo: string; env: Record<string, string | undefined>; sandbox?: Sandbox; replyLimit?: number },
): WorkerAdapter {
  const sandbox = deps.sandbox ? { sandbox: deps.sandbox } : {};
  switch (settings.adapter) {
    case 'openai': {
      // The built-in agent (and the openai package, ~90 ms to load) is loaded at its first
      // turn, not at every start. Until then no turn of it runs: nothing to probe or watch.
      let agent: WorkerAdapter | undefined;
      const load = async () => {
        agent ??= (await import('./openai/agent.ts')).createOpenAIWorker(settings, { env: deps.env, ...sandbox });
        return agent;
      };
      return {
        kind: 'openai',
        runTurn: async (request, observer) => (await load()).runTurn(request, observer),
        running: (session) => agent?.running?.(session),
        probe: (session, question) => {
          if (agent) agent.probe?.(session, question);
          else void load().then((a) => a.probe?.(session, question));
        },
      };
    }
    case 'command':
      return createCommandWorker(settings, { env: deps.env, ...sandbox, ...(deps.replyLimit ? { replyLimit: deps.replyLimit } : {}) });
    case 'sim':
      return createSimWorker(settings, { repo: deps.repo, env: deps.env, ...sandbox });
  }
}
