import { describe, expect, it } from 'vitest';
import { RebuildSchedule } from '../../src/network/schedule.js';

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

describe("RebuildSchedule 'change' policy", () => {
  it('checks every checkEvery batches and counts only real rebuilds', () => {
    const s = new RebuildSchedule({ policy: 'change', checkEvery: 10 });
    expect(s.due(9)).toBe(false);
    expect(s.due(10)).toBe(true);
    s.done(10, false);
    expect(s.rebuilds).toBe(0);
    expect(s.next).toBe(20);
    s.done(20, true);
    expect(s.rebuilds).toBe(1);
    expect(s.next).toBe(30);
  });
  it('rejects bad options', () => {
    expect(() => new RebuildSchedule({ policy: 'sometimes' as never })).toThrow(`Expected 'schedule' or 'change' for rebuild.policy but received "sometimes"`);
    expect(() => new RebuildSchedule({ policy: 'change', threshold: 0 })).toThrow('Expected rebuild.threshold in (0, 1] but received 0');
  });
});
