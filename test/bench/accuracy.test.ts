import { describe, expect, it } from 'vitest';
import { mergeResults, parseSystems, type DatasetResult, type SystemResult } from '../../bench/accuracy.js';

const sys = (name: string, p1: number | null, extra: Partial<SystemResult> = {}): SystemResult =>
  ({ name, p1, p3: null, p5: null, trainSeconds: 1, peakRssMB: 1, curve: [], ...extra });
const ds = (name: string, systems: SystemResult[], extra: Partial<DatasetResult> = {}): DatasetResult =>
  ({ name, points: 10, testPoints: 5, features: 3, labels: 2, systems, ...extra });

describe('parseSystems', () => {
  it('defaults to sublinear and the anchors, takes a list or all, and names unknown systems', () => {
    expect(parseSystems(undefined)).toEqual(['sublinear', 'omikuji', 'pecos', 'napkinxc']);
    expect(parseSystems('pecos, omikuji,pecos')).toEqual(['pecos', 'omikuji']);
    expect(parseSystems('all')).toEqual(['sublinear', 'sublinear-tables', 'sublinear-dense', 'omikuji', 'pecos', 'napkinxc', 'fasttext']);
    expect(() => parseSystems('omikuji,xgboost')).toThrow(
      "unknown system 'xgboost' (known: sublinear, sublinear-tables, sublinear-dense, omikuji, pecos, napkinxc, fasttext, all)",
    );
    expect(() => parseSystems(' , ')).toThrow('--systems needs at least one system');
  });
});

describe('mergeResults', () => {
  it('replaces the systems run again, keeps the others and earlier measurements of tools skipped now', () => {
    const kept = [
      ds('delicious', [sys('sublinear', 0.7), sys('omikuji Parabel', 0.68)]),
      ds('bibtex', [sys('sublinear', 0.63), sys('PECOS XR-Linear', 0.64)]),
    ];
    const now = [
      ds('bibtex', [sys('PECOS XR-Linear', 0.65), sys('omikuji Parabel', null, { skipped: 'not installed' }), sys('napkinXC PLT', 0.62)]),
      ds('debian-tags', [sys('sublinear', 0.9)]),
      ds('delicious', [], { skipped: 'files missing' }),
    ];
    const m = mergeResults(kept, now);
    expect(m.map((d) => d.name)).toEqual(['bibtex', 'delicious', 'debian-tags']); // the bench's dataset order
    expect(m[0]!.systems.map((s) => [s.name, s.p1, s.skipped ?? null])).toEqual([
      ['sublinear', 0.63, null], ['PECOS XR-Linear', 0.65, null], ['omikuji Parabel', null, 'not installed'], ['napkinXC PLT', 0.62, null],
    ]);
    expect(m[1]).toEqual(kept[0]); // skipped now: kept as it was
    const again = mergeResults(m, [ds('bibtex', [sys('omikuji Parabel', null, { skipped: 'gone' }), sys('PECOS XR-Linear', null, { skipped: 'gone' })])]);
    expect(again[0]!.systems.find((s) => s.name === 'PECOS XR-Linear')!.p1).toBe(0.65);
    expect(again[0]!.systems.find((s) => s.name === 'omikuji Parabel')!.skipped).toBe('gone');
    expect(kept[1]!.systems).toHaveLength(2); // inputs are not modified
  });
});
