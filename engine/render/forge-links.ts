/**
 * What of each block is on the forge, read from a run's events alone: the issue it was
 * taken in from (`forge.commented`; a `gh-<n>-…` or `gl-<n>-…` id names it too; a Linear
 * issue, `lin-<team>-<n>-…`, goes by its identifier, ENG-12) and its pull request in
 * PR mode (`pr.observed`, the latest). `tron status` shows them under each block, and the
 * report links them.
 */
import type { TronEvent } from '../core/events.ts';
import { issueRef } from '../forge/intake.ts';

export interface ForgeLink {
  /** `ref`: how people name the issue (#12 on a forge, ENG-12 in Linear). */
  issue?: { number: number; ref: string; url?: string };
  pull?: { number: number; url: string; state: string };
}

export function forgeLinks(events: readonly TronEvent[]): Map<string, ForgeLink> {
  const links = new Map<string, ForgeLink>();
  const at = (block: string) => {
    const known = links.get(block);
    if (known) return known;
    const l: ForgeLink = {};
    links.set(block, l);
    return l;
  };
  let forge = false;
  for (const e of events) {
    if (e.type === 'run.started') forge = e.forge !== undefined;
    else if (e.type === 'register.loaded' && forge) {
      for (const b of e.blocks) {
        const n = /^g[hl]-(\d+)(?:-|$)/.exec(b.id)?.[1];
        if (n && !links.get(b.id)?.issue) at(b.id).issue = { number: Number(n), ref: `#${n}` };
      }
    } else if (e.type === 'forge.commented') {
      const url = e.issue_url ?? links.get(e.block)?.issue?.url;
      at(e.block).issue = { number: e.issue, ref: refOf(e.block, e.issue), ...(url && { url }) };
    } else if (e.type === 'pr.observed') for (const p of e.pulls) at(p.block).pull = { number: p.number, url: p.url, state: p.state };
    // Its head is on trunk now: the forge marks the pull request merged.
    else if (e.type === 'block.landed' && links.get(e.block)?.pull) at(e.block).pull!.state = 'merged';
  }
  return links;
}

/** How people name issue `n` of `block`: a Linear block's by its team's key (ENG-12), a forge's as #12. */
function refOf(block: string, n: number): string {
  const team = /^lin-([a-z0-9]+)-\d+(?:-|$)/.exec(block)?.[1];
  return issueRef(n, team ? `lin-${team}` : 'gh');
}

/** The report's lines: one per block with an issue or a pull request. */
export function forgeSection(events: readonly TronEvent[]): string[] {
  const links = [...forgeLinks(events)].filter(([, l]) => l.issue || l.pull);
  if (links.length === 0) return [];
  const out = ['', '## On the forge', '', '| block | issue | pull request |', '| --- | --- | --- |'];
  for (const [block, l] of links) {
    const issue = l.issue ? (l.issue.url ? `[${l.issue.ref}](${l.issue.url})` : l.issue.ref) : '—';
    const pull = l.pull ? `[#${l.pull.number}](${l.pull.url}) (${l.pull.state})` : '—';
    out.push(`| ${block} | ${issue} | ${pull} |`);
  }
  return out;
}
