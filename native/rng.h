// splitmix64: the one random generator of the native side (same constants as src/util/rng.ts).
#pragma once
#include <cstdint>

namespace sl {

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t nextU32() { return static_cast<uint32_t>(next() >> 32); }
  // Uniform in [0, n) by multiply-shift.
  uint32_t below(uint32_t n) { return static_cast<uint32_t>((static_cast<uint64_t>(nextU32()) * n) >> 32); }
  float nextFloat() { return static_cast<float>(nextU32() >> 8) * (1.0f / 16777216.0f); }
};

}  // namespace sl
