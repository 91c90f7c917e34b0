// PhaseTimer (src/util/phases.ts): seconds per named phase, in first-entered order, nested prefixes sharing
// one set of totals, and a failed phase still counted.
import { describe, expect, it } from 'vitest';
import { PhaseTimer } from '../../src/util/phases.js';

describe('PhaseTimer', () => {
  it('adds seconds per phase in the order the phases were first entered', () => {
    const t = new PhaseTimer();
    t.add('read', 0.25);
    t.add('train', 1.5);
    t.add('read', 0.125);
    expect(t.snapshot()).toEqual({ read: 0.375, train: 1.5 });
    expect(Object.keys(t.snapshot())).toEqual(['read', 'train']);
  });

  it('times a function, also when it throws', async () => {
    const t = new PhaseTimer();
    const wait = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
    expect(await t.time('a', async () => { await wait(30); return 7; })).toBe(7);
    await expect(t.time('b', async () => { await wait(30); throw new Error('boom'); })).rejects.toThrow('boom');
    const s = t.snapshot();
    expect(s.a).toBeGreaterThanOrEqual(0.025);
    expect(s.b).toBeGreaterThanOrEqual(0.025);
  });

  it('a nested timer writes its phases under its prefix into the same totals', () => {
    const t = new PhaseTimer();
    const sel = t.nested('selection.');
    t.add('train', 1);
    sel.add('train', 2);
    sel.nested('fold.').add('heldout', 0.5);
    expect(t.snapshot()).toEqual({ train: 1, 'selection.train': 2, 'selection.fold.heldout': 0.5 });
  });

  it('rounds the snapshot to the millisecond', () => {
    const t = new PhaseTimer();
    t.add('x', 0.12345678);
    expect(t.snapshot()).toEqual({ x: 0.123 });
  });
});
