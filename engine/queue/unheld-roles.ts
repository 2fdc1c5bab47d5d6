/**
 * A job for a role no live agent holds waits in the queue until one starts: the engine says
 * so once per role, at that role's first job — a builder's, a reviewer's, an architect's
 * escalation, a test run — rather than let the run wait without a word.
 */

/** The line for a role no agent holds. */
export function unheldLine(role: string): string {
  const what = role === 'test' ? 'test runs' : `${role} turns`;
  return `tron: no tron agent holds role ${role} yet: ${what} wait in the queue until one starts (\`tron agent --roles ${role}\`)`;
}

export class UnheldRoles {
  private readonly looked = new Set<string>();

  /** `holders(role)`: how many live agents of the repository hold `role` now (undefined: not known). */
  constructor(private readonly holders: (role: string) => Promise<number | undefined>) {}

  /** At a job of `role`: the first time, asks who holds it, and says so with `print` when nobody does. */
  look(role: string, print: (line: string) => void): void {
    if (this.looked.has(role)) return;
    this.looked.add(role);
    void this.holders(role).then(
      (n) => {
        if (n === 0) print(unheldLine(role));
      },
      () => undefined,
    );
  }
}
