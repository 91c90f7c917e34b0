// Compact hash tables over a layer's neurons: counting-sort rebuild, incremental update, and candidate
// queries (union / top-k by frequency / frequency threshold) with an epoch-stamp dedup.
//
// Memory model (see lsh.h): one flat id array per table with per-bucket capacity
// min(bucketSize, count + slack) fixed at rebuild, so a table costs N + B * slack ids instead of the
// B * bucketSize slab of reference SLIDE (which is 50 * 2^18 * 128 * 4 B = 6.7 GB at Amazon-670K scale).
//
// Randomness: table t draws from its own stream table_stream(seed, t), so a rebuild split across workers by
// table ranges gives exactly the tables of a serial rebuild.
#include <algorithm>
#include <cstring>
#include <string>

#include "lsh.h"
#include "napi_util.h"
#include "rng.h"

namespace sl {

namespace {

void check_tables(const Tables& t) {
  if (t.L == 0 || t.N == 0) throw ArgError("tables: L and N must be positive");
  if (t.rangeBits == 0 || t.rangeBits > 24) throw ArgError("tables: rangeBits must be in 1..24");
  if (t.bucketSize == 0) throw ArgError("tables: bucketSize must be positive");
  if (t.tableCapacity != uint64_t(t.N) + uint64_t(t.buckets()) * t.slack)
    throw ArgError("tables: tableCapacity must equal N + 2^rangeBits * slack");
  if (!t.offsets || !t.fill || !t.seen || !t.ids || !t.keys) throw ArgError("tables: missing array");
}

[[noreturn]] void corrupt(const char* what) {
  throw ArgError(std::string("tables are corrupt (") + what + "): rebuild them");
}

// Removes `id` from bucket [base, base + fill) if present. FIFO keeps insertion order (entry 0 stays the
// oldest, which is what "drop the oldest" relies on); reservoir order is irrelevant, so swap-remove.
inline bool bucket_remove(uint32_t* base, uint32_t& fill, uint32_t id, BucketPolicy policy) {
  for (uint32_t i = 0; i < fill; ++i) {
    if (base[i] != id) continue;
    if (policy == BucketPolicy::FIFO) std::memmove(base + i, base + i + 1, size_t(fill - i - 1) * sizeof(uint32_t));
    else base[i] = base[fill - 1];
    --fill;
    return true;
  }
  return false;
}

inline void bucket_insert(uint32_t* base, uint32_t& fill, uint32_t& seen, uint32_t cap, uint32_t id,
                          BucketPolicy policy, SplitMix64& rng) {
  ++seen;
  if (cap == 0) return;
  if (fill < cap) { base[fill++] = id; return; }
  if (policy == BucketPolicy::FIFO) {
    std::memmove(base, base + 1, size_t(cap - 1) * sizeof(uint32_t));
    base[cap - 1] = id;
  } else {
    // Algorithm R: the newcomer replaces a uniform slot with probability cap / seen.
    uint32_t j = rng.below(seen);
    if (j < cap) base[j] = id;
  }
}

void build_one(Tables& T, uint32_t t, uint64_t seed, std::vector<uint32_t>& order) {
  const uint32_t N = T.N, B = T.buckets();
  uint32_t* off = T.offsets + size_t(t) * (B + 1);
  uint32_t* fill = T.fill + size_t(t) * B;
  uint32_t* seen = T.seen + size_t(t) * B;
  uint32_t* ids = T.ids + size_t(t) * T.tableCapacity;
  const uint32_t* keys = T.keys + size_t(t) * N;

  // Count into `seen` first: a bad key throws before offsets/fill/ids change, so the old table stays usable.
  std::memset(seen, 0, size_t(B) * sizeof(uint32_t));
  for (uint32_t n = 0; n < N; ++n) {
    uint32_t k = keys[n];
    if (k >= B) throw ArgError("tables: key out of range (>= 2^rangeBits) in tables.keys");
    ++seen[k];
  }
  // Capacities and bucket starts; `fill` temporarily holds each bucket's start in `order`.
  uint32_t pos = 0, start = 0;
  for (uint32_t b = 0; b < B; ++b) {
    off[b] = pos;
    pos += std::min(T.bucketSize, seen[b] + T.slack);
    fill[b] = start;
    start += seen[b];
  }
  off[B] = pos;
  // Counting sort of neuron ids by key (id order inside a bucket).
  uint32_t* ord = order.data();
  for (uint32_t n = 0; n < N; ++n) ord[fill[keys[n]]++] = n;

  // Inserting the bucket's members in a uniformly random order and applying FIFO (keep the last cap) or
  // reservoir (algorithm R) leaves, in both cases, a uniformly random subset of size min(count, cap) in
  // random order. Draw exactly that with a partial Fisher-Yates: O(min(count, cap)) draws per bucket instead
  // of an N-permutation and O(count * cap) FIFO shifting in huge buckets.
  SplitMix64 rng(stream_seed(seed, t));
  for (uint32_t b = 0; b < B; ++b) {
    uint32_t c = seen[b];
    if (c == 0) { fill[b] = 0; continue; }
    uint32_t* mem = ord + (fill[b] - c);
    uint32_t cap = off[b + 1] - off[b], k = std::min(c, cap);
    for (uint32_t i = 0; i < k && i + 1 < c; ++i) {
      uint32_t j = i + rng.below(c - i);
      std::swap(mem[i], mem[j]);
    }
    std::memcpy(ids + off[b], mem, size_t(k) * sizeof(uint32_t));
    fill[b] = k;  // seen[b] = c: insertions since rebuild, as reservoir sampling needs
  }
}

}  // namespace

void tables_build(Tables& T, uint32_t t0, uint32_t t1, uint64_t seed) {
  check_tables(T);
  if (t0 > t1 || t1 > T.L) throw ArgError("tables: table range [t0, t1) must satisfy t0 <= t1 <= L");
  if (t0 == t1) return;
  std::vector<uint32_t> order(T.N);
  for (uint32_t t = t0; t < t1; ++t) build_one(T, t, seed, order);
}

void tables_rehash(Tables& T, const HashParams& p, const float* vectors, uint32_t t0, uint32_t t1, uint64_t seed) {
  check_tables(T);
  if (p.L != T.L || p.rangeBits != T.rangeBits) throw ArgError("tables: hash L/rangeBits differ from the tables'");
  if (t0 > t1 || t1 > T.L) throw ArgError("tables: table range [t0, t1) must satisfy t0 <= t1 <= L");
  if (t0 == t1) return;
  HashScratch s;
  const uint32_t n = t1 - t0, N = T.N;
  // Hash in blocks of neurons into a (block, n) buffer, then transpose into the table-major keys.
  constexpr uint32_t kBlock = 2048;  // amortises hash_dense_batch's per-call setup (SimHash matrix copy)
  std::vector<uint32_t> k(size_t(kBlock) * n);
  for (uint32_t i0 = 0; i0 < N; i0 += kBlock) {
    const uint32_t nb = std::min(kBlock, N - i0);
    hash_dense_batch(p, vectors + size_t(i0) * p.dim, p.dim, nb, t0, t1, k.data(), n, s);
    for (uint32_t j = 0; j < n; ++j) {
      uint32_t* dst = T.keys + size_t(t0 + j) * N + i0;
      for (uint32_t i = 0; i < nb; ++i) dst[i] = k[size_t(i) * n + j];
    }
  }
  tables_build(T, t0, t1, seed);
}

void tables_update(Tables& T, const uint32_t* neuronIds, const uint32_t* newKeys, uint32_t n, uint64_t seed) {
  check_tables(T);
  const uint32_t N = T.N, B = T.buckets(), L = T.L;
  for (uint32_t i = 0; i < n; ++i) {
    if (neuronIds[i] >= N) throw ArgError("tables: neuron id out of range (>= N)");
    for (uint32_t t = 0; t < L; ++t)
      if (newKeys[size_t(i) * L + t] >= B) throw ArgError("tables: new key out of range (>= 2^rangeBits)");
  }
  for (uint32_t t = 0; t < L; ++t) {
    uint32_t* off = T.offsets + size_t(t) * (B + 1);
    uint32_t* fill = T.fill + size_t(t) * B;
    uint32_t* seen = T.seen + size_t(t) * B;
    uint32_t* ids = T.ids + size_t(t) * T.tableCapacity;
    uint32_t* keys = T.keys + size_t(t) * N;
    // Update streams are disjoint from rebuild streams of the same seed (index L + t).
    SplitMix64 rng(stream_seed(seed, uint64_t(L) + t));
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t id = neuronIds[i], nk = newKeys[size_t(i) * L + t], ok = keys[id];
      if (nk == ok) continue;
      if (ok >= B) corrupt("stored key");
      if (off[ok + 1] < off[ok] || off[ok + 1] > T.tableCapacity || fill[ok] > off[ok + 1] - off[ok]) corrupt("offsets");
      if (off[nk + 1] < off[nk] || off[nk + 1] > T.tableCapacity || fill[nk] > off[nk + 1] - off[nk]) corrupt("offsets");
      bucket_remove(ids + off[ok], fill[ok], id, T.policy);
      bucket_insert(ids + off[nk], fill[nk], seen[nk], off[nk + 1] - off[nk], id, T.policy, rng);
      keys[id] = nk;
    }
  }
}

uint32_t tables_query(const Tables& T, const uint32_t* keys, const uint32_t* required, uint32_t nRequired,
                      const QueryOptions& o, uint64_t rngSeed, QueryScratch& s, uint32_t* out, uint32_t cap) {
  const uint32_t N = T.N, B = T.buckets(), L = T.L;
  if (L > 65535) throw ArgError("tables: L must be <= 65535");
  if (s.stamp.size() < N) s.stamp.resize(N, 0);
  if (++s.epoch == 0) {  // wrapped: old stamps could collide with the new epoch
    std::fill(s.stamp.begin(), s.stamp.end(), 0u);
    s.epoch = 1;
  }
  const uint32_t e = s.epoch;
  uint32_t* stamp = s.stamp.data();
  uint32_t n = 0;

  for (uint32_t i = 0; i < nRequired && n < cap; ++i) {
    uint32_t id = required[i];
    if (id >= N) throw ArgError("query: required id out of range (>= N)");
    if (stamp[id] != e) { stamp[id] = e; out[n++] = id; }
  }

  // Bucket of table tb for this query, with cheap bounds checks (the arrays live in JS-writable memory).
  auto bucket = [&](uint32_t tb, uint32_t& len) -> const uint32_t* {
    uint32_t b = keys[tb];
    if (b >= B) throw ArgError("query: key out of range (>= 2^rangeBits)");
    const uint32_t* off = T.offsets + size_t(tb) * (B + 1) + b;
    len = T.fill[size_t(tb) * B + b];
    if (off[1] < off[0] || off[1] > T.tableCapacity || len > off[1] - off[0]) corrupt("offsets/fill");
    return T.ids + size_t(tb) * T.tableCapacity + off[0];
  };

  const uint32_t limit = std::min(o.budget, cap - n);
  if (limit > 0) {
    // The L buckets sit at random places in arrays of tens of MB: each read below is a cache miss, and
    // taken one table at a time they serialise (~3 misses x L). Touch them in two prefetch waves first
    // (offsets/fill, then the id runs) so the misses overlap.
    for (uint32_t tb = 0; tb < L; ++tb) {
      uint32_t b = keys[tb];
      if (b >= B) continue;  // reported by bucket() below
      __builtin_prefetch(T.offsets + size_t(tb) * (B + 1) + b);
      __builtin_prefetch(T.fill + size_t(tb) * B + b);
    }
    for (uint32_t tb = 0; tb < L; ++tb) {
      uint32_t b = keys[tb];
      if (b >= B) continue;
      uint32_t start = T.offsets[size_t(tb) * (B + 1) + b];
      if (start < T.tableCapacity) __builtin_prefetch(T.ids + size_t(tb) * T.tableCapacity + start);
    }
    if (o.mode == QueryMode::Union) {
      uint32_t taken = 0;
      for (uint32_t tb = 0; tb < L && taken < limit; ++tb) {
        uint32_t len;
        const uint32_t* ids = bucket(tb, len);
        for (uint32_t i = 0; i < len; ++i) {
          uint32_t id = ids[i];
          if (id >= N) corrupt("id");
          if (stamp[id] == e) continue;
          stamp[id] = e;
          out[n++] = id;
          if (++taken == limit) break;
        }
      }
    } else if (o.mode == QueryMode::TopK || o.mode == QueryMode::Threshold) {
      if (s.count.size() < N) s.count.resize(N, 0);
      uint16_t* count = s.count.data();
      s.touched.clear();
      for (uint32_t tb = 0; tb < L; ++tb) {
        uint32_t len;
        const uint32_t* ids = bucket(tb, len);
        for (uint32_t i = 0; i < len; ++i) {
          uint32_t id = ids[i];
          if (id >= N) {
            for (uint32_t x : s.touched) count[x] = 0;  // keep the all-zero invariant before throwing
            corrupt("id");
          }
          if (stamp[id] == e) continue;  // required ids are already out
          if (count[id]++ == 0) s.touched.push_back(id);
        }
      }
      const uint32_t* touched = s.touched.data();
      const uint32_t nt = static_cast<uint32_t>(s.touched.size());
      if (o.mode == QueryMode::Threshold) {
        const uint32_t minFreq = std::max<uint32_t>(o.minFreq, 1);
        uint32_t taken = 0;
        for (uint32_t i = 0; i < nt && taken < limit; ++i) {
          uint32_t id = touched[i];
          if (count[id] >= minFreq) { stamp[id] = e; out[n++] = id; ++taken; }
        }
      } else {
        // Stable counting sort by frequency (desc), only as far as `limit` ids: find the cut frequency f*
        // and how many ids of frequency f* fit, then place ids in one first-seen-order pass.
        if (s.hist.size() < size_t(L) + 1) s.hist.resize(size_t(L) + 1);
        uint32_t* hist = s.hist.data();
        std::fill(hist, hist + L + 1, 0u);
        for (uint32_t i = 0; i < nt; ++i) ++hist[count[touched[i]]];
        uint32_t remaining = std::min(limit, nt), fcut = 1, quota = 0;
        for (uint32_t f = L; f >= 1; --f) {
          if (hist[f] >= remaining) { fcut = f; quota = remaining; break; }
          remaining -= hist[f];
        }
        // hist[f] becomes the output position of the next id of frequency f (f >= fcut).
        uint32_t pos = n;
        for (uint32_t f = L; f >= fcut; --f) {
          uint32_t take = f == fcut ? quota : hist[f];
          hist[f] = pos;
          pos += take;
        }
        for (uint32_t i = 0; i < nt; ++i) {
          uint32_t id = touched[i], f = count[id];
          if (f < fcut) continue;
          if (f == fcut) { if (quota == 0) continue; --quota; }
          stamp[id] = e;
          out[hist[f]++] = id;
        }
        n = pos;
      }
      for (uint32_t i = 0; i < nt; ++i) count[touched[i]] = 0;
    } else {
      throw ArgError("query: unknown mode");
    }
  }

  // Random fill: rejection sampling while collisions are rare, then a scan from a random start so that a
  // minActive close to N cannot loop for long.
  const uint32_t target = std::min(std::min(o.minActive, N), cap);
  if (n < target) {
    SplitMix64 rng(rngSeed);
    uint64_t attempts = 4ull * (target - n) + 64;
    while (n < target && attempts-- > 0) {
      uint32_t id = rng.below(N);
      if (stamp[id] != e) { stamp[id] = e; out[n++] = id; }
    }
    if (n < target) {
      uint32_t start = rng.below(N);
      for (uint32_t k = 0; k < N && n < target; ++k) {
        uint32_t id = start + k < N ? start + k : start + k - N;
        if (stamp[id] != e) { stamp[id] = e; out[n++] = id; }
      }
    }
  }
  return n;
}

}  // namespace sl
