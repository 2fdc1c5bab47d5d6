/**
 * `tron lint`: parse and lint the pass spine (engine/workflow.toml, or another file)
 * and the escalation table, and print every problem at once — so a change to the
 * workflow is checked before it drives a run.
 */
import { formatProblem } from '../core/errors.ts';
import { ESCALATION } from '../spine/spine.ts';
import { checkSpineFile, SPINE_FILE, spineDisplayName } from '../spine/load.ts';

export interface LintOptions {
  /** Spine file to check; the checkout's own engine/workflow.toml by default. */
  spine?: string;
  print: (line: string) => void;
}

/** Exit status: 0 when the spine and ESCALATION are clean, 2 when any problem is found. */
export async function lintCommand(opts: LintOptions): Promise<number> {
  const file = opts.spine ?? SPINE_FILE;
  const { spine, problems } = checkSpineFile(file);
  for (const p of problems) opts.print(formatProblem(p));
  if (!spine || problems.length > 0) return 2;
  const transitions = spine.phases.reduce((n, p) => n + p.transitions.length, 0);
  const rows = Object.keys(ESCALATION).length;
  opts.print(
    `tron lint: ${spineDisplayName(file)} and ESCALATION are clean (${spine.phases.length} phases, ${transitions} transitions, ${rows} escalation rows)`,
  );
  return 0;
}
