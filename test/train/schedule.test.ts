import { describe, expect, it } from 'vitest';
import { RebuildSchedule } from '../../src/train/schedule.js';

describe('RebuildSchedule', () => {
  it('starts after `first` batches and grows the interval geometrically up to the cap', () => {
    const s = new RebuildSchedule({ first: 10, growth: 2, maxInterval: 50 });
    const at: number[] = [];
    for (let b = 0; b <= 200; b++) {
      if (s.due(b)) {
        at.push(b);
        s.done(b);
      }
    }
    // intervals 10, 20, 40, 50, 50, ...
    expect(at).toEqual([10, 30, 70, 120, 170]);
  });
  it('uses SLIDE-like defaults', () => {
    const s = new RebuildSchedule();
    expect(s.first).toBe(50);
    expect(s.due(49)).toBe(false);
    expect(s.due(50)).toBe(true);
  });
  it('rejects bad options', () => {
    expect(() => new RebuildSchedule({ first: 0 })).toThrow('Expected positive integer for rebuild.first but received 0');
    expect(() => new RebuildSchedule({ growth: 0.5 })).toThrow('Expected rebuild.growth >= 1 but received 0.5');
  });
});
