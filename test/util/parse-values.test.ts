import { describe, expect, it } from 'vitest';
import { durationSeconds, integerValue, numberValue, parseDuration, parseInteger, parseSize } from '../../src/util/parse-values.js';
import { parseBytes } from '../../src/network/memory-plan.js';
import { parseCheckpointEvery } from '../../src/train/checkpoint.js';

describe('integerValue / parseInteger', () => {
  it('accepts signed decimal safe integers only', () => {
    expect(integerValue('42')).toBe(42);
    expect(integerValue('-7')).toBe(-7);
    expect(integerValue('+3')).toBe(3);
    for (const bad of ['', ' 1', '1 ', '1.0', '1e3', '0x10', 'Infinity', '9007199254740993', 'one']) expect(integerValue(bad), bad).toBeUndefined();
  });
  it('checks inclusive bounds', () => {
    expect(parseInteger('1', { min: 1, max: 2 })).toBe(1);
    expect(parseInteger('2', { min: 1, max: 2 })).toBe(2);
    expect(parseInteger('0', { min: 1 })).toBeUndefined();
    expect(parseInteger('3', { max: 2 })).toBeUndefined();
  });
});

describe('numberValue', () => {
  it('accepts finite decimal numbers only', () => {
    expect(numberValue('0.5')).toBe(0.5);
    expect(numberValue('.5')).toBe(0.5);
    expect(numberValue('-1e-3')).toBe(-0.001);
    expect(numberValue('2.')).toBe(2);
    for (const bad of ['', 'Infinity', 'NaN', '1e999', '0x10', '1,5', ' 1']) expect(numberValue(bad), bad).toBeUndefined();
  });
});

describe('parseSize (--max-memory)', () => {
  it('reads SI and binary units; parseBytes is the same function', () => {
    expect(parseSize('2.5GB')).toBe(2_500_000_000);
    expect(parseSize('4GiB')).toBe(4 * 2 ** 30);
    expect(parseSize('1e9')).toBe(1e9);
    expect(parseBytes).toBe(parseSize);
  });
  it('names the setting in its errors', () => {
    expect(() => parseSize('lots', '--cache')).toThrow('Expected a size like 2.5GB, 512M, 4GiB or 1e9 for --cache but received "lots"');
    expect(() => parseSize('0')).toThrow('Expected a positive size for --max-memory but received "0"');
  });
});

describe('durations', () => {
  it('reads <n>s, <n>m and <n>h in seconds', () => {
    expect(durationSeconds('90s')).toBe(90);
    expect(durationSeconds('10m')).toBe(600);
    expect(durationSeconds('1.5 h')).toBe(5400);
    for (const bad of ['10', '0s', '-1m', '1d', 'm', '1.m']) expect(durationSeconds(bad), bad).toBeUndefined();
    expect(() => parseDuration('10', '--every')).toThrow('Expected a duration (e.g. 90s, 10m, 1h) for --every but received "10"');
  });
  it('checkpoint `every` uses them, with its message unchanged', () => {
    expect(parseCheckpointEvery('10m')).toEqual({ seconds: 600 });
    expect(parseCheckpointEvery(' 500 ')).toEqual({ batches: 500 });
    expect(() => parseCheckpointEvery('0')).toThrow('Expected a number of batches (e.g. 500) or a duration (e.g. 90s, 10m, 1h) for checkpoint every but received "0"');
  });
});
