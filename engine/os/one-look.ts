/**
 * A look — a query for results, notes or asks, a poll — run one at a time: asked while one
 * runs, it runs once more after that one ends, so two never run at once and no request is
 * lost (what changed during a look is seen by the next). A look that fails is let go: the
 * next ask, or the caller's timer, looks again.
 */
export class OneLook {
  private running: Promise<void> | undefined;
  private again = false;

  /** `skip`: when a look is not worth making now (closed, nothing to look for); asked each time. */
  constructor(
    private readonly look: () => Promise<unknown>,
    private readonly skip: () => boolean = () => false,
  ) {}

  /** Looks now, or once more after the look under way. */
  ask(): void {
    if (this.skip()) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.look()
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.ask();
        }
      });
  }

  /** The look under way, if any (a close waits for it). */
  get current(): Promise<void> | undefined {
    return this.running;
  }
}
