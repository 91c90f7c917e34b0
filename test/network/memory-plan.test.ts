import { describe, expect, it } from 'vitest';
import { checkMemory, formatBytes, parseBytes, planMemory, planNetworkMemory } from '../../src/network/memory-plan.js';
import { resolveConfig } from '../../src/network/config.js';
import { synthesize } from '../../src/datasets/index.js';

const AMAZON_670K = {
  inputDim: 135909,
  workers: 1,
  layers: [{ size: 128 }, { size: 670091, sampled: { L: 50, rangeBits: 18, bucketSize: 128, slack: 1 } }],
};

describe('planMemory', () => {
  it('counts every part of a small configuration exactly', () => {
    const plan = planMemory({
      inputDim: 10,
      workers: 2,
      batchSize: 4,
      dataset: { nnz: 50, labelNnz: 12, points: 8 },
      layers: [{ size: 4 }, { size: 6, sampled: { L: 2, rangeBits: 3, bucketSize: 4, slack: 1, budget: 3 } }],
    });
    expect(plan.parts).toEqual([
      // Per worker, batch 4: activations 12 B * 4 * (4 + 3 active) = 336; gradient rows: output layer
      // min(6, 4 * 3) = 6 rows of 4 floats, layer 0 min(10, 4 * ceil(50 / 8)) = 10 rows of 4 floats
      // -> 64 floats = 256 B; 592 B per worker, 2 workers.
      { name: 'worker scratch (2 workers)', bytes: 1184 },
      // 10 x 4 = 40 weights and 4 biases, 12 B each (value, Adam m, Adam v).
      { name: 'layer 0 weights+Adam', bytes: 528 },
      // 4 B * (offsets 9 + labelOffsets 9 + indices 50 + values 50 + labelIndices 12 = 130).
      { name: 'training data', bytes: 520 },
      // L = 2, B = 2^3 = 8, N = 6: offsets 2*9 + fill 2*8 + seen 2*8 + ids 2*(6 + 8*1) + keys 2*6 = 90 u32.
      { name: 'output layer hash tables', bytes: 360 },
      // 4 x 6 = 24 weights and 6 biases, 12 B each.
      { name: 'output layer weights+Adam', bytes: 360 },
      // Input-major layer 0: one counter per input row (10) + biasSteps.
      { name: 'layer 0 step counters', bytes: 44 },
      // Neuron-major: one counter per neuron (6) + biasSteps.
      { name: 'output layer step counters', bytes: 28 },
    ]);
    expect(plan.totalBytes).toBe(3024);
  });

  it('planNetworkMemory reads the layers, tables and training data off a resolved configuration and a dataset', () => {
    const data = synthesize({ shape: 'tiny', points: 100, seed: 1 });
    const config = resolveConfig({ inputDim: data.features, layers: [{ size: 16 }, { size: data.labels, sampling: { K: 3, L: 5, rangeBits: 6, bucketSize: 8, slack: 2 } }] });
    const layers = [{ size: 16 }, { size: data.labels, sampled: { L: 5, rangeBits: 6, bucketSize: 8, slack: 2 } }];
    const dataset = { nnz: data.offsets[data.points]!, labelNnz: data.labelOffsets[data.points]!, points: data.points };
    expect(planNetworkMemory(config, 3, data)).toEqual(planMemory({ inputDim: data.features, layers, dataset, workers: 3 }));
    expect(planNetworkMemory(config, 0)).toEqual(planMemory({ inputDim: data.features, layers, workers: 0 }));
  });

  it('planNetworkMemory counts a wide part: at most maxPerLabel pairs per label and one per (feature, label) occurrence', () => {
    const data = synthesize({ shape: 'tiny', points: 100, seed: 1 });
    const config = resolveConfig({ inputDim: data.features, layers: [{ size: 16 }, { size: data.labels, wide: { maxPerLabel: 3 } }] });
    const plain = planNetworkMemory(resolveConfig({ inputDim: data.features, layers: [{ size: 16 }, { size: data.labels }] }), 0, data);
    let occurrences = 0;
    for (let i = 0; i < data.points; i++) occurrences += (data.offsets[i + 1]! - data.offsets[i]!) * (data.labelOffsets[i + 1]! - data.labelOffsets[i]!);
    const pairs = Math.min(3 * data.labels, occurrences);
    const withWide = planNetworkMemory(config, 0, data);
    expect(withWide.parts.find((p) => p.name === 'output layer wide part')!.bytes).toBe(4 * (data.features + 1) + 12 * pairs);
    expect(withWide.totalBytes).toBe(plain.totalBytes + 4 * (data.features + 1) + 12 * pairs);
    expect(planNetworkMemory(config, 0, data, true).parts.find((p) => p.name === 'output layer wide part')!.bytes).toBe(4 * (data.features + 1) + 16 * pairs);
  });

  it('Amazon-670K (135,909 -> 128 -> 670,091, DWTA L=50, rangeBits 18, bucketSize 128, slack 1) needs 1,951,989,316 bytes with one worker', () => {
    const plan = planMemory(AMAZON_670K);
    expect(plan.parts).toEqual([
      // 128 * 670,091 = 85,771,648 weights + 670,091 biases = 86,441,739 floats, 12 B each.
      { name: 'output layer weights+Adam', bytes: 1_037_300_868 },
      // B = 2^18 = 262,144: 50*262,145 + 2*50*262,144 + 50*(670,091 + 262,144) + 50*670,091 = 119,437,950 u32.
      { name: 'output layer hash tables', bytes: 477_751_800 },
      // Batch 128, active 128 + 3,351 (default budget ceil(0.005 * 670,091)): 12 * 128 * 3,479 = 5,343,744 B
      // of activations, plus min(670,091, 128 * 3,351 = 428,928) rows * 128 floats * 4 B = 219,611,136 B.
      { name: 'worker scratch (1 worker)', bytes: 224_954_880 },
      // 135,909 * 128 = 17,396,352 weights + 128 biases, 12 B each.
      { name: 'layer 0 weights+Adam', bytes: 208_757_760 },
      { name: 'output layer step counters', bytes: 2_680_368 },
      { name: 'layer 0 step counters', bytes: 543_640 },
    ]);
    expect(plan.totalBytes).toBe(1_951_989_316); // about 1.95 GB
    // Each extra worker adds one scratch set.
    expect(planMemory({ ...AMAZON_670K, workers: 4 }).totalBytes).toBe(1_951_989_316 + 3 * 224_954_880);
  });

  it('validates its input', () => {
    expect(() => planMemory({ inputDim: 0, workers: 1, layers: [{ size: 1 }] })).toThrow('Expected positive integer for inputDim but received 0');
    expect(() => planMemory({ inputDim: 5, workers: 1, layers: [] })).toThrow('Expected at least one layer in layers');
    expect(() => planMemory({ inputDim: 5, workers: -1, layers: [{ size: 1 }] })).toThrow('Expected non-negative integer for workers but received -1');
    expect(() =>
      planMemory({ inputDim: 5, workers: 1, layers: [{ size: 8, sampled: { L: 0, rangeBits: 3, bucketSize: 4, slack: 1 } }] }),
    ).toThrow('Expected positive integer for layers[0].sampled.L but received 0');
  });
});

describe('checkMemory', () => {
  const plan = planMemory(AMAZON_670K);

  it('names the largest parts and the limit when the plan does not fit', () => {
    expect(() => checkMemory(plan, { maxBytes: 1.5e9 })).toThrow(
      'Not enough memory: the configuration needs 1.95 GB (output layer weights+Adam 1.04 GB, output layer hash tables 478 MB, ' +
        'worker scratch (1 worker) 225 MB, ...) but the limit is 1.50 GB (--max-memory)',
    );
    expect(checkMemory(plan, { maxBytes: 2e9 })).toBe(2e9);
  });

  it('defaults to 90% of the machine memory', () => {
    expect(() => checkMemory(plan, { machineBytes: 2e9 })).toThrow(
      'Not enough memory: the configuration needs 1.95 GB (output layer weights+Adam 1.04 GB, output layer hash tables 478 MB, ' +
        'worker scratch (1 worker) 225 MB, ...) but the limit is 1.80 GB (90% of the machine memory)',
    );
    expect(checkMemory(plan, { machineBytes: 4e9 })).toBe(3.6e9);
    expect(checkMemory(planMemory({ inputDim: 10, workers: 1, layers: [{ size: 2 }] }))).toBeGreaterThan(0);
  });

  it('lists fewer parts without an ellipsis', () => {
    const small = planMemory({ inputDim: 1000, workers: 0, layers: [{ size: 1000 }] });
    // 12 * (1,000,000 + 1000) = 12,012,000; scratch 12 * 128 * 1000 = 1,536,000; counters 4 * 1001 = 4004.
    expect(() => checkMemory(small, { maxBytes: 1e6, limitName: 'maxMemory' })).toThrow(
      'Not enough memory: the configuration needs 13.6 MB (output layer weights+Adam 12.0 MB, worker scratch (1 worker) 1.54 MB, ' +
        'output layer step counters 4.00 kB) but the limit is 1.00 MB (maxMemory)',
    );
  });
});

describe('parseBytes', () => {
  it('accepts SI and binary units, exponents and plain numbers', () => {
    expect(parseBytes('2.5GB')).toBe(2_500_000_000);
    expect(parseBytes('512M')).toBe(512_000_000);
    expect(parseBytes('1e9')).toBe(1_000_000_000);
    expect(parseBytes('4GiB')).toBe(4_294_967_296);
    expect(parseBytes('1.5 kib')).toBe(1536);
    expect(parseBytes(' 100 ')).toBe(100);
    expect(parseBytes('.5g')).toBe(500_000_000);
    expect(parseBytes('3Ti')).toBe(3 * 2 ** 40);
    expect(parseBytes('2.5e3K')).toBe(2_500_000);
    expect(parseBytes('10.7B')).toBe(10);
  });
  it('rejects anything else with a message naming the flag', () => {
    expect(() => parseBytes('lots')).toThrow('Expected a size like 2.5GB, 512M, 4GiB or 1e9 for --max-memory but received "lots"');
    expect(() => parseBytes('')).toThrow('Expected a size like 2.5GB, 512M, 4GiB or 1e9 for --max-memory but received ""');
    expect(() => parseBytes('-1G')).toThrow('Expected a size like 2.5GB, 512M, 4GiB or 1e9 for --max-memory but received "-1G"');
    expect(() => parseBytes('5XB', 'maxMemory')).toThrow('Expected a size like 2.5GB, 512M, 4GiB or 1e9 for maxMemory but received "5XB"');
    expect(() => parseBytes('0')).toThrow('Expected a positive size for --max-memory but received "0"');
    expect(() => parseBytes('0.2')).toThrow('Expected a positive size for --max-memory but received "0.2"');
    expect(() => parseBytes('1e30')).toThrow('Expected a size below 9 PB for --max-memory but received "1e30"');
  });
});

describe('formatBytes', () => {
  it('uses SI units with 3 significant digits', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(999)).toBe('999 B');
    expect(formatBytes(1000)).toBe('1.00 kB');
    expect(formatBytes(999_600_000)).toBe('1.00 GB');
    expect(formatBytes(1_037_300_868)).toBe('1.04 GB');
    expect(formatBytes(477_751_800)).toBe('478 MB');
  });
});
