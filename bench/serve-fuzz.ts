// Invalid `POST /predict` bodies (none is a valid request, for any model) for the server's fuzz runs (test/serve/server.test.ts, bench/serve.ts):
// byte-flipped and truncated valid bodies, wrong types in every field, out-of-range feature ids, odd
// numbers, deep nesting. Seeded: the same seed gives the same bodies.

/** Values that are wrong for each field (whatever the model). */
const WRONG: Record<string, readonly string[]> = {
  features: ['null', '[]', '"x"', '1.5', '{"-1": 1}', '{"1": "1"}', '{"1": null}'],
  instances: ['[]', '{}', 'null', '[1]', '[{}]', '[{"features": {}, "text": ""}]'],
  text: ['null', '[]', '1', '{}'],
  k: ['0', '1.5', '"3"', 'null', '-1', '1e9'],
  mode: ['"fast"', 'null', '1', '""', '"EXACT"'],
};

/** A generator of malformed bodies derived from `valid` (a valid request body). */
export function fuzzBodies(valid: string, seed: number): () => Buffer {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const pick = <T>(a: readonly T[]) => a[Math.floor(rnd() * a.length)]!;
  const atoms = ['null', 'true', '1e400', '-0', '"x"', '[]', '{}', '"\\ud800"', '1.5', '-7', '99999999999', '"sampled"', '{"1":NaN}', '""'];
  const fields = ['features', 'instances', 'text', 'k', 'mode'];
  return () => {
    switch (Math.floor(rnd() * 7)) {
      case 0: { // a few random bytes of a valid body replaced, so that it is no longer JSON (a flipped digit
        // could leave a valid request)
        const b = Buffer.from(valid);
        for (let j = 0; j < 1 + rnd() * 5; j++) b[Math.floor(rnd() * b.length)] = Math.floor(rnd() * 256);
        try {
          JSON.parse(b.toString('utf8'));
        } catch {
          return b;
        }
        return Buffer.from(`${b.toString('latin1')},`);
      }
      case 1:
        return Buffer.from(valid.slice(0, Math.floor(rnd() * valid.length)));
      case 2: {
        const field = pick(fields);
        return Buffer.from(`{"${field}": ${pick(WRONG[field]!)}}`);
      }
      case 3:
        return Buffer.from(`{"features": {"${Math.floor(rnd() * 2 ** 33) - 2 ** 20}": ${pick(atoms)}}, "k": ${pick(atoms)}}`);
      case 4:
        return Buffer.from(`{"instances": [${Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => pick(atoms)).join(',')}], "mode": ${pick(atoms)}}`);
      case 5: { // a valid body with one field set to a value of the wrong type or out of range
        const o = JSON.parse(valid) as Record<string, unknown>;
        const field = pick(fields);
        o[field] = JSON.parse(pick(WRONG[field]!));
        return Buffer.from(JSON.stringify(o));
      }
      default:
        return Buffer.from('['.repeat(Math.floor(rnd() * 5000)) + ']'.repeat(Math.floor(rnd() * 5000)));
    }
  };
}
