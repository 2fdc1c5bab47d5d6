import { describe, expect, it } from 'vitest';
import { DECISION_TYPES } from '../../engine/core/events.ts';
import { EFFECTS } from '../../engine/runtime/effects/table.ts';
import { NO_EFFECT, REACTIONS } from './reactions.ts';

describe("the simulated world's reactions", () => {
  it('answer every decision the engine runs an effect for, or say why the world does without it', () => {
    const disagreeing = DECISION_TYPES.flatMap((type) => {
      const row = REACTIONS[type];
      const none: string | undefined = 'none' in row ? row.none : undefined;
      const engineActs = EFFECTS[type] !== null;
      // A decision the engine runs no effect for changes nothing in the world either; one it does run
      // an effect for is answered or acted on here, or its `none` names what the world leaves out.
      if (!engineActs && none !== undefined && none !== NO_EFFECT) return [`${type}: the engine runs no effect for it; say so`];
      if (engineActs && none === NO_EFFECT)
        return [`${type}: the engine runs an effect for it; answer it, or say what the world leaves out`];
      return [];
    });
    expect(disagreeing).toEqual([]);
  });
});
