// Locality-sensitive hashing of vectors into K-sub-hash keys for L tables, and the compact hash tables
// that index a layer's neurons by those keys. Contract shared by lsh_*.cc (implementation), the
// network kernels (which query tables per sample) and src/lsh (which allocates every array).
//
// Legend: K = sub-hashes per key, L = tables, D = vector dimension, N = neurons indexed,
//         B = 2^rangeBits buckets per table, M = K*L total sub-hashes ("bins").
//
// Keys. Table t's key packs its K sub-hashes h[t*K + j] (each < 2^bitsPerHash) without overlap:
//   raw = sum_j h[t*K + j] << (j * bitsPerHash)           (K * bitsPerHash <= 32, checked)
//   key = raw                                   if K * bitsPerHash <= rangeBits
//   key = (uint32)((raw * 0x9E3779B97F4A7C15ull) >> (64 - rangeBits))   otherwise (fold)
// so every one of the 2^(K*bitsPerHash) raw codes is reachable (unlike reference SLIDE's DWTA keys).
//
// All hash parameters (bins, projections, permutations) are generated from a seed in TypeScript
// (src/lsh) and passed in; C++ never draws hash randomness itself, so a TS reference can reproduce
// every code exactly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sl {

enum class HashFamily : uint32_t { SimHash = 0, DWTA = 1, WTA = 2, MinHash = 3 };

// Views into TS-owned arrays describing one hash function family instance.
struct HashParams {
  HashFamily family = HashFamily::DWTA;
  uint32_t K = 0, L = 0, dim = 0;
  uint32_t bitsPerHash = 0;  // SimHash: 1; DWTA/WTA: log2(binSize); MinHash: configured
  uint32_t rangeBits = 0;    // B = 2^rangeBits buckets per table, 1..24
  uint32_t binSize = 0;      // DWTA/WTA: entries per bin (power of two)
  uint32_t seed = 0;         // used only by densification probing (DWTA, MinHash)
  // DWTA/WTA: binDims[(m * binSize) + p] = dimension examined at position p of bin m, m < M.
  const uint32_t* binDims = nullptr;
  // SimHash: projection m uses dims projDims[projOffsets[m] .. projOffsets[m+1]) with signs projSigns[..] (+1/-1).
  const uint32_t* projOffsets = nullptr;
  const uint32_t* projDims = nullptr;
  const float* projSigns = nullptr;
  // SimHash, optional: the same projections as a dense (M, D) matrix of +1/-1/0, for small D. When present,
  // dense input is hashed by a vectorised mat-vec (identical result: see the sum order below).
  const int8_t* projMatrix = nullptr;
  // MinHash: perm[d] = rank of dimension d in a random permutation of [0, D); bin width w = ceil(D / M);
  // bin of d = perm[d] / w, offset = perm[d] % w.
  const uint32_t* perm = nullptr;
  // DWTA sparse hashing: inverse of binDims. dimBins[dimBinOffsets[d] .. dimBinOffsets[d+1]) lists
  // m * binSize + p for every bin position examining dimension d.
  const uint32_t* dimBinOffsets = nullptr;
  const uint32_t* dimBins = nullptr;
};

// Sub-hash semantics (identical for dense and sparse input; "nonzero" means value != 0):
//   SimHash: h[m] = (sum over projection m of sign * x[dim]) >= 0 ? 1 : 0, summed in float in 8 lanes: the term
//            of dim d goes to lane d % 8, each lane in increasing d (projDims are sorted ascending), and the
//            lanes combine as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). (Fixed so that the vectorised mat-vec, the
//            sparse path and the TS reference agree bit for bit; x must be finite for that.)
//   WTA:     h[m] = position p (first on ties) of the max of x[binDims[m*binSize + p]] over all p
//            (zeros included). A bin is never empty.
//   DWTA:    h[m] = position p (first on ties) of the max over the *nonzero* entries of bin m. A bin with
//            no nonzero entry is empty and is densified (below).
//   MinHash: over the nonzero dims of x, h[m] = (min offset among dims falling in bin m) & (2^bitsPerHash-1);
//            a bin with no nonzero dim is empty and is densified.
// Densification (DWTA, MinHash) of empty bin m, in order: for attempt a = 1..64,
//   m' = mix32(m ^ (a * 0x9E3779B9u) ^ seed) % M; the first non-empty m' gives h[m] = h[m'].
//   If none of the 64 probes hit, take the first non-empty bin at m+1, m+2, ... (wrapping).
//   If every bin is empty, h[m] = 0 for all m.
// mix32 is murmur3's fmix32: x ^= x >> 16; x *= 0x85ebca6b; x ^= x >> 13; x *= 0xc2b2ae35; x ^= x >> 16.
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16; x *= 0x85ebca6bu; x ^= x >> 13; x *= 0xc2b2ae35u; x ^= x >> 16;
  return x;
}

// Seed of the i-th independent sub-stream of `seed` (= the (i+1)-th splitmix64 output of `seed`): used to
// derive per-table and per-query streams. Seeding splitmix64 with seed + i instead would make neighbouring
// streams shifted copies of each other.
inline uint64_t stream_seed(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Reusable per-thread buffers for hashing (never shared between threads).
struct HashScratch {
  std::vector<float> binMax;
  std::vector<uint32_t> sub;  // sub-hashes
  std::vector<uint8_t> empty;
  std::vector<float> dense;   // (D) scatter buffer for sparse SimHash/WTA input; all zeros between calls
  std::vector<float> matrix;  // hash_dense_batch: float copy of SimHash's sign matrix / transposed DWTA block
  std::vector<uint32_t> batch;  // hash_dense_batch: sub-hashes of a block of vectors
};

// Keys of tables [t0, t1) for one dense vector x (D). keys: (t1 - t0).
void hash_dense(const HashParams& p, const float* x, uint32_t t0, uint32_t t1, uint32_t* keys, HashScratch& s);
// Same for n dense vectors: vector i is X[i * xStride .. + D) (xStride >= D, e.g. a padded activation row),
// its keys go to keys + i * keyStride. Identical results to n hash_dense calls, several times faster:
// SimHash with a projMatrix converts the matrix to float once per call and streams it once per 16 vectors;
// DWTA transposes blocks of 8/16 vectors so that one SIMD lane follows one vector (no gathers).
void hash_dense_batch(const HashParams& p, const float* X, size_t xStride, size_t n, uint32_t t0, uint32_t t1,
                      uint32_t* keys, size_t keyStride, HashScratch& s);
// Same for one sparse vector given as (idx[i], val[i]), i < nnz, idx < D (unsorted allowed, no duplicates).
void hash_sparse(const HashParams& p, const uint32_t* idx, const float* val, uint32_t nnz, uint32_t t0, uint32_t t1,
                 uint32_t* keys, HashScratch& s);

// Caps the SIMD level of the hash kernels (0 scalar, 1 AVX2+FMA, 2 AVX-512F) process-wide and returns the level
// now in use (min of the cap and what the CPU supports). Results never depend on it; tests use it to run
// every code path against the reference.
int lsh_set_simd_cap(int cap);

enum class BucketPolicy : uint32_t { FIFO = 0, Reservoir = 1 };

// L compact tables over N neurons. Table t, bucket b holds fill[t*B + b] ids at
//   ids[t * tableCapacity + offsets[t*(B+1) + b] + i], i < fill[...],
// with capacity offsets[t*(B+1) + b + 1] - offsets[t*(B+1) + b] = min(bucketSize, count_b + slack) fixed at
// the last rebuild (count_b = neurons whose key is b). tableCapacity = N + B * slack.
// keys[t * N + n] is neuron n's current key in table t (kept for incremental updates and change sketches).
// seen[t*B + b] counts insertions into the bucket since its table's last rebuild (reservoir sampling).
struct Tables {
  uint32_t L = 0, N = 0, rangeBits = 0, bucketSize = 0, slack = 0;
  BucketPolicy policy = BucketPolicy::FIFO;
  uint64_t tableCapacity = 0;
  uint32_t* offsets = nullptr;  // (L, B + 1)
  uint32_t* fill = nullptr;     // (L, B)
  uint32_t* seen = nullptr;     // (L, B)
  uint32_t* ids = nullptr;      // (L, tableCapacity)
  uint32_t* keys = nullptr;     // (L, N)
  uint32_t buckets() const { return 1u << rangeBits; }
};

// Rebuilds tables [t0, t1) from tables.keys (already written for those tables). Each bucket ends up holding
// a uniformly random subset of size min(count, capacity) of its neurons, in random order - what inserting
// them in a random order under FIFO or reservoir would leave - so an overflowing bucket never keeps just the
// highest ids. Table t draws from splitmix64(stream_seed(seed, t)): rebuilding table ranges on different
// workers gives exactly the tables of one serial rebuild.
void tables_build(Tables& t, uint32_t t0, uint32_t t1, uint64_t seed);

// Hashes vectors (n, D) row-major into tables.keys for tables [t0, t1), then rebuilds those tables.
void tables_rehash(Tables& t, const HashParams& p, const float* vectors, uint32_t t0, uint32_t t1, uint64_t seed);

// Incremental update of neurons ids[0..n): newKeys (n, L). A neuron whose key changed leaves its old bucket
// (FIFO: order-preserving erase, so entry 0 stays the oldest; reservoir: swap-remove) and enters the new one:
// appended if there is room; if full, FIFO drops the oldest entry, reservoir replaces a random slot with
// probability capacity / seen. Table t draws from splitmix64(stream_seed(seed, L + t)). Throws ArgError on ids
// >= N or keys >= 2^rangeBits (checked before anything changes).
void tables_update(Tables& t, const uint32_t* neuronIds, const uint32_t* newKeys, uint32_t n, uint64_t seed);

enum class QueryMode : uint32_t { Union = 0, TopK = 1, Threshold = 2 };

struct QueryOptions {
  QueryMode mode = QueryMode::Union;
  uint32_t budget = 0;     // max candidates taken from the tables (required ids not counted)
  uint32_t minFreq = 1;    // Threshold: keep ids found in at least minFreq tables
  uint32_t minActive = 0;  // random fill (uniform over [0, N), no duplicates) up to this many ids in total
};

// Per-thread query buffers sized to N lazily.
struct QueryScratch {
  std::vector<uint32_t> stamp;   // stamp[id] == epoch  <=> id already in the output
  std::vector<uint16_t> count;   // TopK/Threshold frequency counts
  std::vector<uint32_t> touched;
  std::vector<uint32_t> hist;    // TopK: ids per frequency (L + 1)
  uint32_t epoch = 0;
};

// Candidate set for one query given its L keys. Output order: required ids (deduplicated, in given order),
// then table candidates (Union: table order, bucket order; TopK: by frequency desc, ties by first-seen;
// Threshold: first-seen order), then random fill. Writes at most `cap` ids to out and returns the count.
// cap must be >= nRequired + budget + minActive is NOT required; output is simply truncated at cap.
// Allocation-free once `s` has grown to N (call it per sample from a batch kernel). Random fill draws from
// splitmix64(rngSeed). Throws ArgError on required ids >= N, keys >= 2^rangeBits or corrupt table contents
// (every bucket read is bounds-checked: the arrays live in JS-writable memory); never reads out of bounds.
uint32_t tables_query(const Tables& t, const uint32_t* keys, const uint32_t* required, uint32_t nRequired,
                      const QueryOptions& o, uint64_t rngSeed, QueryScratch& s, uint32_t* out, uint32_t cap);

}  // namespace sl
