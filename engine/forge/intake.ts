/**
 * Issue intake (`[intake] label = "tron"`): an open issue with the label is a block, read
 * from the issue alone, purely:
 *
 * - id `gh-<number>-<slug>` (GitLab: `gl-…`, Linear: `lin-<team>-…`; the slug from the title: lower case, words
 *   joined by `-`, at most 40 characters; `gh-<number>` when the title has no letters or digits);
 * - title: the issue's; brief: the body, with a line naming the issue;
 * - criteria: the body's task list (`- [ ] …`, `- [x] …`), or else the items of a
 *   `Criteria` (or `Acceptance criteria`) section — a heading or a bold line — one per item;
 * - `depends on #N` lines (also `depends on #3, #4`): issue N's block, when N is taken in
 *   too; nothing, when N is closed (its work is done); otherwise the issue is refused.
 *
 * An issue tron cannot use is refused with every problem stated, each with its fix: the
 * forge posts them as one comment (engine/forge/sync.ts) and the issue is not started.
 */
import { createHash } from 'node:crypto';
import type { Block } from '../project/register.ts';
import { BLOCK_FILE_LIMIT } from '../project/register.ts';
import type { ForgeIssue } from './forge.ts';

/** What intake makes of one issue: a block, or the problems that keep it from being one. */
export type IssueBlock =
  | { issue: ForgeIssue; block: Block; depends: number[] }
  | { issue: ForgeIssue; problems: string[]; depends: number[] };

/** The block id of issue `number` titled `title`, on the forge whose issue ids start with `forge` (GitHub's "gh", GitLab's "gl"). */
export function issueBlockId(number: number, title: string, forge = 'gh'): string {
  const prefix = `${forge}-${number}`;
  const slug = title
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/, '');
  return slug ? `${prefix}-${slug}` : prefix;
}

const TASK = /^\s*[-*+]\s+\[[ xX]\]\s+(.+?)\s*$/;
const ITEM = /^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.+?)\s*$/;
const CRITERIA_HEAD = /^\s*(?:#{1,6}\s*|\*\*|__)?\s*(?:acceptance\s+)?criteria\s*:?\s*(?:\*\*|__)?\s*:?\s*$/i;
const HEADING = /^\s*(?:#{1,6}\s+\S|(?:\*\*|__)[^*_]+(?:\*\*|__)\s*:?\s*$)/;
const DEPENDS = /\bdepends\s+on\s+((?:#\d+(?:\s*(?:,|and)\s*)?)+)/gi;

/** Criteria from a body: its task list, else its Criteria section's items. */
export function criteriaOf(body: string): string[] {
  const lines = body.replace(/\r\n?/g, '\n').split('\n');
  const tasks = lines.map((l) => TASK.exec(l)?.[1]).filter((t): t is string => t !== undefined);
  if (tasks.length > 0) return tasks;
  const start = lines.findIndex((l) => CRITERIA_HEAD.test(l));
  if (start < 0) return [];
  const items: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (HEADING.test(line) && !ITEM.test(line)) break;
    const m = ITEM.exec(line);
    if (m) items.push(m[1]!);
  }
  return items;
}

/** The issue numbers a body's `depends on #N` lines name, in order, without duplicates. */
export function dependsOf(body: string): number[] {
  const out: number[] = [];
  for (const m of body.matchAll(DEPENDS)) for (const n of m[1]!.matchAll(/#(\d+)/g)) out.push(Number(n[1]));
  return [...new Set(out)];
}

/** How people name issue `number` on the tracker whose ids start with `forge`: ENG-12 in Linear (`lin-eng`), #12 on a forge. */
export function issueRef(number: number, forge = 'gh'): string {
  return forge.startsWith('lin-') ? `${forge.slice(4).toUpperCase()}-${number}` : `#${number}`;
}

/** One issue as a block, or its problems; dependencies are resolved later, against the other issues. */
export function issueToBlock(issue: ForgeIssue, forge = 'gh'): IssueBlock {
  const body = issue.body.replace(/\r\n?/g, '\n').trim();
  const problems: string[] = [];
  const criteria = criteriaOf(body);
  const depends = dependsOf(body);
  if (criteria.length === 0)
    problems.push(
      'It has no acceptance criteria. Add a task list to the body, one criterion per item (`- [ ] POST /login returns a token`), or a `## Criteria` section with one item per criterion.',
    );
  if (Buffer.byteLength(body) > BLOCK_FILE_LIMIT)
    problems.push(
      `Its body is larger than ${BLOCK_FILE_LIMIT / 1024} KB; every prompt of the block carries it. Shorten it, or link to the long parts.`,
    );
  if (depends.includes(issue.number)) problems.push(`It depends on itself (\`depends on #${issue.number}\`); remove that line.`);
  if (problems.length > 0) return { issue, problems, depends };
  const id = issueBlockId(issue.number, issue.title, forge);
  const brief = `${body}\n\n(From issue ${issueRef(issue.number, forge)}: ${issue.url})`;
  const digest = createHash('sha256')
    .update(JSON.stringify({ title: issue.title, body: issue.body, number: issue.number }))
    .digest('hex');
  return {
    issue,
    depends,
    block: {
      id,
      title: issue.title.trim() || `Issue #${issue.number}`,
      dependsOn: [],
      priority: 0,
      criteria,
      brief,
      file: issue.url,
      digest,
    },
  };
}

/**
 * Resolves `depends on #N` across the issues taken in: to N's block id; dropped when N is
 * closed (`closed` says which numbers are); a problem when N is neither (open without the
 * label, or not an issue), or when N was refused itself. Then refuses every issue caught
 * in a dependency cycle. Pure: the caller looked the other issues up.
 */
export function resolveDependencies(items: readonly IssueBlock[], closed: ReadonlySet<number>, label: string): IssueBlock[] {
  const byNumber = new Map(items.map((x) => [x.issue.number, x]));
  let out = items.map((x): IssueBlock => {
    if (!('block' in x)) return x;
    const problems: string[] = [];
    const deps: string[] = [];
    for (const n of x.depends) {
      const other = byNumber.get(n);
      if (other && 'block' in other) deps.push(other.block.id);
      else if (other) problems.push(`It depends on #${n}, which tron cannot start either (see the comment there); fix #${n} first.`);
      else if (!closed.has(n))
        problems.push(
          `It depends on #${n}, which is not an open issue labelled \`${label}\`. Label #${n} \`${label}\` so tron does it first, or remove the line once it is done.`,
        );
    }
    return problems.length > 0 ? { issue: x.issue, problems, depends: x.depends } : { ...x, block: { ...x.block, dependsOn: deps } };
  });
  // A refusal can refuse the issues that depend on it: settle until nothing changes.
  for (let changed = true; changed; ) {
    changed = false;
    const refused = new Set(out.filter((x) => !('block' in x)).map((x) => x.issue.number));
    out = out.map((x) => {
      if (!('block' in x)) return x;
      const bad = x.depends.filter((n) => refused.has(n));
      if (bad.length === 0) return x;
      changed = true;
      return {
        issue: x.issue,
        depends: x.depends,
        problems: bad.map((n) => `It depends on #${n}, which tron cannot start either (see the comment there); fix #${n} first.`),
      };
    });
  }
  const cyclic = cycleMembers(out);
  return out.map((x) =>
    'block' in x && cyclic.has(x.issue.number)
      ? {
          issue: x.issue,
          depends: x.depends,
          problems: [`Its \`depends on\` lines form a cycle through ${[...cyclic].map((n) => `#${n}`).join(', ')}; remove one of them.`],
        }
      : x,
  );
}

/** Issue numbers on a dependency cycle among the blocks. */
function cycleMembers(items: readonly IssueBlock[]): Set<number> {
  const graph = new Map(items.filter((x) => 'block' in x).map((x) => [x.issue.number, x.depends]));
  const onCycle = new Set<number>();
  for (const start of graph.keys()) {
    const seen = new Set<number>();
    const stack = [...(graph.get(start) ?? [])];
    while (stack.length > 0) {
      const n = stack.pop()!;
      if (n === start) {
        onCycle.add(start);
        break;
      }
      if (seen.has(n) || !graph.has(n)) continue;
      seen.add(n);
      stack.push(...graph.get(n)!);
    }
  }
  return onCycle;
}

/** The comment that tells an issue's author what to fix. */
export function refusalText(problems: readonly string[], label: string): string {
  return [
    `tron cannot start this issue yet:`,
    '',
    ...problems.map((p) => `- ${p}`),
    '',
    `Edit the issue and tron takes it in at its next start (or at once, with \`tron start --watch\`). Remove the \`${label}\` label to withdraw it.`,
  ].join('\n');
}
