/**
 * Which blocks are parked for the operator, followed line by line. A run that did not end
 * by itself (a signal, a spent budget, a failure) counts every block still open in its
 * `run.finished` `parked` list — those under way as well as those parked — and only the
 * parked ones wait for an answer: the next start goes on with the others by itself.
 */
import type { EventOf, TronEvent } from '../core/events.ts';

export class ParkedNow {
  private readonly parked = new Set<string>();

  see(e: TronEvent): void {
    switch (e.type) {
      case 'block.parked':
        this.parked.add(e.block);
        break;
      case 'block.recovered':
        if (e.phase === 'parked') this.parked.add(e.block);
        else this.parked.delete(e.block);
        break;
      case 'block.phase':
        if (e.from === 'parked') this.parked.delete(e.block);
        break;
      case 'block.abandoned':
      case 'block.landed':
        this.parked.delete(e.block);
        break;
      default:
        break;
    }
  }

  /** `run.finished`'s open blocks: those parked for the operator, and (a run stopped early) those merely unfinished. */
  split(e: EventOf<'run.finished'>): { parked: string[]; unfinished: string[] } {
    if (e.reason === 'done') return { parked: [...e.parked], unfinished: [] };
    return { parked: e.parked.filter((id) => this.parked.has(id)), unfinished: e.parked.filter((id) => !this.parked.has(id)) };
  }
}
