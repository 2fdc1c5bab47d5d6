/**
 * Pages the operator (see engine/core/decide/escalate.ts for when): pages.md, and the
 * page_command with a JSON page on stdin. The console shows the page from its
 * `page.sent` event (engine/render/narrate.ts). An escalation to the architect is a turn,
 * not a page: it has no effect here.
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import type { BodyOf, EventOf } from '../../core/events.ts';
import { answerCommand } from '../../gateway/answer-command.ts';
import { type EffectContext, effect } from './context.ts';

export const page = effect({
  run: (c, e: EventOf<'escalation.raised'>) => (e.handler === 'operator' ? pageOperator(c, e) : undefined),
});

async function pageOperator(c: EffectContext, e: EventOf<'escalation.raised'>): Promise<BodyOf<'page.sent'>> {
  const id = `${e.block}#${e.seq}`;
  const answer = answerCommand(c.repo, e.block);
  // The detail quotes what a worker or a test printed: indented as a block, no line of it can open a page of its own.
  const quoted = e.detail
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');
  appendFileSync(join(c.runDir, 'pages.md'), `## ${id} — ${e.block}: ${e.trouble}\n\n${quoted}\n\nAnswer: \`${answer}\`\n\n`);
  let command: string | undefined;
  if (c.config.pageCommand) {
    const [file, ...args] = c.config.pageCommand;
    command = c.config.pageCommand.join(' ');
    const pageJson = JSON.stringify({ page: id, block: e.block, trouble: e.trouble, reason: e.detail, run: c.runDir, answer });
    const result = await execa(file!, args, { input: pageJson, reject: false, timeout: 60_000, cwd: c.repo });
    if (result.exitCode !== 0) c.print(`tron: the page command exited ${result.exitCode}: ${(result.stderr ?? '').toString().slice(-500)}`);
  }
  return { type: 'page.sent', block: e.block, page: id, reason: e.detail, ...(command ? { command } : {}) };
}
