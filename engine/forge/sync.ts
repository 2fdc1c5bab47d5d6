/**
 * Takes the labelled issues in: reads them from the forge, makes blocks of those it can
 * (engine/forge/intake.ts), and tells the author of each one it cannot — one comment per
 * version of the issue, found by its marker before it is posted, so a restart or a crash
 * never posts it twice. The blocks join the register the engine loads, and so enter the
 * run as `register.loaded`: the decision path sees issues only as that recorded input.
 */
import type { Block } from '../project/register.ts';
import { commentOnce, type IssueTracker, marker } from './forge.ts';
import { type IssueBlock, issueToBlock, refusalText, resolveDependencies } from './intake.ts';

export interface Intake {
  blocks: Block[];
  /** Refused issues, with their problems. */
  refused: { number: number; problems: string[] }[];
  /** The issue behind each block id taken in. */
  issues: Record<string, { number: number; url: string }>;
  /** The list's ETag, for the next (conditional, free when unchanged) poll. */
  etag?: string;
}

/** Reads the open issues labelled `label` and makes blocks of them; comments on the refused ones. */
export async function takeIssuesIn(forge: IssueTracker, label: string, opts: { etag?: string } = {}): Promise<Intake | 'unchanged'> {
  const list = await forge.listIssues(label, opts.etag);
  if (list === 'unchanged') return 'unchanged';
  const prefix = forge.issuePrefix ?? 'gh';
  const items: IssueBlock[] = list.issues.map((i) => issueToBlock(i, prefix));
  const taken = new Set(list.issues.map((i) => i.number));
  const closed = new Set<number>();
  for (const n of new Set(items.flatMap((x) => x.depends))) {
    if (taken.has(n)) continue;
    const other = await forge.issue(n);
    if (other?.state === 'closed') closed.add(n);
  }
  const resolved = resolveDependencies(items, closed, label);
  const refused: Intake['refused'] = [];
  for (const x of resolved) {
    if ('block' in x) continue;
    refused.push({ number: x.issue.number, problems: x.problems });
    // One comment per version of what is wrong: an edit that leaves it wrong in another way is told again.
    const key = digestKey(x.problems.join('\n'));
    await commentOnce(forge, x.issue.number, marker(`${prefix}-${x.issue.number}`, 'refused', key), refusalText(x.problems, label));
  }
  const blocks = resolved.flatMap((x) => ('block' in x ? [x.block] : []));
  return {
    blocks,
    refused,
    issues: Object.fromEntries(resolved.flatMap((x) => ('block' in x ? [[x.block.id, { number: x.issue.number, url: x.issue.url }]] : []))),
    ...(list.etag && { etag: list.etag }),
  };
}

/** A short, stable key of a text (FNV-1a, hex): enough to tell one refusal from the next. */
function digestKey(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}
