import { describe, expect, it } from 'vitest';
import { markdownTable, mergeResults, parseSystems, phaseLine, speedRatio, type DatasetResult, type SystemResult } from '../../bench/accuracy.js';

const sys = (name: string, p1: number | null, extra: Partial<SystemResult> = {}): SystemResult =>
  ({ name, p1, p3: null, p5: null, trainSeconds: 1, peakRssMB: 1, curve: [], ...extra });
const ds = (name: string, systems: SystemResult[], extra: Partial<DatasetResult> = {}): DatasetResult =>
  ({ name, points: 10, testPoints: 5, features: 3, labels: 2, systems, ...extra });

describe('parseSystems', () => {
  it('defaults to sublinear and the anchors, takes a list or all, and names unknown systems', () => {
    expect(parseSystems(undefined)).toEqual(['sublinear', 'omikuji', 'pecos', 'napkinxc', 'ovr-lr']);
    expect(parseSystems('pecos, omikuji,pecos')).toEqual(['pecos', 'omikuji']);
    expect(parseSystems('all')).toEqual(['sublinear', 'sublinear-tables', 'sublinear-dense', 'omikuji', 'pecos', 'napkinxc', 'ovr-lr', 'fasttext']);
    expect(() => parseSystems('omikuji,xgboost')).toThrow(
      "unknown system 'xgboost' (known: sublinear, sublinear-tables, sublinear-dense, omikuji, pecos, napkinxc, ovr-lr, fasttext, all)",
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

describe('phaseLine, speedRatio, markdownTable', () => {
  const ours = sys('sublinear', 0.93, { p3: 0.64, p5: 0.48, trainSeconds: 4, peakRssMB: 290, phases: { read: 0.1, train: 2.5, 'rerank.classifiers': 0.6, test: 0.005, total: 4 } });
  const omikuji = sys('omikuji Parabel', 0.931, { p3: 0.645, p5: 0.485, trainSeconds: 5.7, peakRssMB: 163 });
  const pecos = sys('PECOS XR-Linear', 0.923, { trainSeconds: 3.2 });
  const d = ds('debian-tags', [ours, omikuji, pecos, sys('napkinXC PLT', null, { skipped: 'not installed' })], { points: 24229, labels: 554 });
  it('lists a run\'s phases largest first, leaving out those under 10 ms, then the total', () => {
    expect(phaseLine(ours.phases!)).toBe('train 2.50, rerank.classifiers 0.60, read 0.10, (total 4.00 s)');
  });
  it('the fastest anchor that ran over sublinear\'s whole command', () => {
    expect(speedRatio(d)).toBe('fastest anchor (PECOS XR-Linear) 3.20 s / sublinear 4.00 s = 0.80');
    expect(speedRatio(ds('x', [ours]))).toBeNull();
  });
  it('one Markdown row per dataset, the best P@1 in bold, skipped systems said', () => {
    const t = markdownTable([d, ds('gone', [], { skipped: 'files missing' })]).trimEnd().split('\n');
    expect(t).toHaveLength(3);
    expect(t[2]).toBe('| debian-tags (24229, 554) | 0.930 / 0.640 / 0.480, 4.0 s, 290 MB | **0.931** / 0.645 / 0.485, 5.7 s, 163 MB | 0.923 / - / -, 3.2 s, 1 MB | skipped | - | 0.80 | train 2.5, rerank.classifiers 0.6, read 0.1, test 0.0 |');
  });
});
