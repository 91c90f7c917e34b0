// sublinear_mpi: the few MPI collectives data-parallel training needs (src/train/mpi.ts describes them),
// in an addon of its own so that the main addon and its prebuilt binary never depend on libmpi. Built by
// scripts/build-mpi.cjs only where Open MPI's (or MPICH's) compiler wrapper is found.
//
// Every call blocks the calling (main) thread until the collective completes (idleBarrier sleeping, the others
// polling); MPI is initialised with
// MPI_THREAD_FUNNELED and only the main thread calls it (worker threads run kernels only). Errors of MPI
// calls keep MPI's default handler on MPI_COMM_WORLD (MPI_ERRORS_ARE_FATAL: the job is aborted, which is
// what a training job should do when a peer is gone); argument errors become JS exceptions.
#include <dlfcn.h>
#include <mpi.h>

#include <time.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "napi_util.h"

namespace {

using sl::ArgError;

bool gInit = false, gFinal = false;

void RequireInit() {
  if (!gInit) throw ArgError("MPI is not initialised (call init first)");
  if (gFinal) throw ArgError("MPI was finalised");
}

void Check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw ArgError(std::string(what) + " failed: " + std::string(msg, len));
}

// Open MPI builds that load their components (mca_*.so) with dlopen expect libmpi's symbols to be global.
// Node loads an addon with RTLD_LOCAL, so libmpi (a dependency of this addon) is local too, and such
// components then fail with "undefined symbol". Re-opening the library that defines MPI_Init with
// RTLD_GLOBAL (RTLD_NOLOAD: the loaded copy, not a second one) makes its symbols global. (Debian's Open MPI
// 4.1.4 happens to work without it; other builds and versions do not.)
void PromoteLibmpi() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) && info.dli_fname)
    if (dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) return;
  for (const char* name : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"})
    if (dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) return;
}

// init() -> { rank, size, threadLevel, library }
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (gFinal) throw ArgError("MPI was finalised and cannot be initialised again");
  if (!gInit) {
    PromoteLibmpi();
    int provided = 0;
    Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    gInit = true;
  }
  int rank = 0, size = 0, provided = 0, len = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Query_thread(&provided);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  MPI_Get_library_version(lib, &len);
  std::string libs(lib, len);
  if (auto nl = libs.find_first_of("\r\n,"); nl != std::string::npos) libs.resize(nl);
  char host[MPI_MAX_PROCESSOR_NAME];
  int hlen = 0;
  MPI_Get_processor_name(host, &hlen);
  Napi::Object o = Napi::Object::New(env);
  o.Set("rank", rank);
  o.Set("size", size);
  o.Set("threadLevel", provided);
  o.Set("library", libs);
  o.Set("host", std::string(host, hlen));
  return o;
}

// allgatherv(bytes: Uint8Array) -> { data: Uint8Array (every rank's bytes, rank order), counts: number[] }
Napi::Value Allgatherv(const Napi::CallbackInfo& info) {
  RequireInit();
  auto in = sl::GetArray<uint8_t>(info[0], "bytes");
  if (in.size > size_t(INT_MAX)) throw ArgError("allgatherv: a rank's buffer must be under 2 GiB");
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mine = static_cast<int>(in.size);
  std::vector<int> counts(size), displs(size);
  Check(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    if (total > size_t(INT_MAX)) throw ArgError("allgatherv: the gathered buffers exceed 2 GiB");
    displs[r] = static_cast<int>(total);
    total += size_t(counts[r]);
  }
  if (total > size_t(INT_MAX)) throw ArgError("allgatherv: the gathered buffers exceed 2 GiB");
  Napi::Env env = info.Env();
  auto out = Napi::Uint8Array::New(env, total);
  Check(MPI_Allgatherv(in.data, mine, MPI_BYTE, out.Data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  Napi::Array c = Napi::Array::New(env, size);
  for (int r = 0; r < size; ++r) c.Set(uint32_t(r), counts[r]);
  Napi::Object o = Napi::Object::New(env);
  o.Set("data", out);
  o.Set("counts", c);
  return o;
}

// gatherv(bytes: Uint8Array, root) -> on root { data: every rank's bytes in rank order, counts }, elsewhere
// { data: empty, counts }: what only one rank needs (a sharded model gathered for saving).
Napi::Value Gatherv(const Napi::CallbackInfo& info) {
  RequireInit();
  auto in = sl::GetArray<uint8_t>(info[0], "bytes");
  if (in.size > size_t(INT_MAX)) throw ArgError("gatherv: a rank's buffer must be under 2 GiB");
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int root = static_cast<int>(sl::GetU32(info[1], "root"));
  if (root >= size) throw ArgError("gatherv: root must be < size");
  int mine = static_cast<int>(in.size);
  std::vector<int> counts(size), displs(size);
  Check(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    if (total > size_t(INT_MAX)) throw ArgError("gatherv: the gathered buffers exceed 2 GiB");
    displs[r] = static_cast<int>(total);
    total += size_t(counts[r]);
  }
  if (total > size_t(INT_MAX)) throw ArgError("gatherv: the gathered buffers exceed 2 GiB");
  Napi::Env env = info.Env();
  auto out = Napi::Uint8Array::New(env, rank == root ? total : 0);
  Check(MPI_Gatherv(in.data, mine, MPI_BYTE, rank == root ? out.Data() : nullptr, counts.data(), displs.data(), MPI_BYTE,
                    root, MPI_COMM_WORLD),
        "MPI_Gatherv");
  Napi::Array c = Napi::Array::New(env, size);
  for (int r = 0; r < size; ++r) c.Set(uint32_t(r), counts[r]);
  Napi::Object o = Napi::Object::New(env);
  o.Set("data", out);
  o.Set("counts", c);
  return o;
}

// allreduceSum(values: Float32Array | Float64Array): sums every rank's array element-wise, in place.
Napi::Value AllreduceSum(const Napi::CallbackInfo& info) {
  RequireInit();
  if (!info[0].IsTypedArray()) throw ArgError("Expected Float32Array or Float64Array for values");
  auto ta = info[0].As<Napi::TypedArray>();
  MPI_Datatype type;
  void* data = nullptr;
  size_t n = 0;
  if (ta.TypedArrayType() == napi_float32_array) {
    auto s = sl::GetArray<float>(info[0], "values");
    data = s.data, n = s.size, type = MPI_FLOAT;
  } else if (ta.TypedArrayType() == napi_float64_array) {
    auto s = sl::GetArray<double>(info[0], "values");
    data = s.data, n = s.size, type = MPI_DOUBLE;
  } else {
    throw ArgError("Expected Float32Array or Float64Array for values");
  }
  if (n > size_t(INT_MAX)) throw ArgError("allreduceSum: at most 2^31 - 1 elements");
  Check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), type, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return info.Env().Undefined();
}

// bcast(view: any typed array, root): root's bytes into every rank's view (same length on every rank), in
// pieces of at most 1 GiB.
Napi::Value Bcast(const Napi::CallbackInfo& info) {
  RequireInit();
  if (!info[0].IsTypedArray()) throw ArgError("Expected a typed array for view");
  napi_typedarray_type type;
  size_t length = 0, offset = 0;
  void* data = nullptr;
  napi_value ab;
  if (napi_get_typedarray_info(info.Env(), info[0], &type, &length, &data, &ab, &offset) != napi_ok)
    throw ArgError("Cannot read typed array view");
  const size_t bytes = info[0].As<Napi::TypedArray>().ByteLength();
  const int root = static_cast<int>(sl::GetU32(info[1], "root"));
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (root >= size) throw ArgError("bcast: root must be < size");
  constexpr size_t kPiece = size_t(1) << 30;
  for (size_t o = 0; o < bytes; o += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, bytes - o));
    Check(MPI_Bcast(static_cast<uint8_t*>(data) + o, n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  return info.Env().Undefined();
}

Napi::Value Barrier(const Napi::CallbackInfo& info) {
  RequireInit();
  Check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  return info.Env().Undefined();
}

// idleBarrier(maxSleepUs = 1000): a barrier whose waiting ranks sleep instead of spinning. MPI's blocking calls
// poll until they complete (Open MPI's mpi_yield_when_idle only adds sched_yield, which gives nothing back to a
// thread of another process on another core), so ranks that wait while rank 0 alone works (the k-fold
// selection of a small set, a checkpoint's manifest) would hold a core each that rank 0's threads need when the
// ranks share a machine. Here the barrier is started (MPI_Ibarrier) and tested with sleeps growing from 8 us to
// maxSleepUs between tests: a waiting rank takes a few microseconds of CPU per test, and the barrier completes at
// most maxSleepUs after the last rank arrives. Errors are thrown, never aborted on.
Napi::Value IdleBarrier(const Napi::CallbackInfo& info) {
  RequireInit();
  const uint32_t cap = info.Length() > 0 && !info[0].IsUndefined() ? sl::GetU32(info[0], "maxSleepUs") : 1000;
  if (cap < 1 || cap > 1000000) throw ArgError("idleBarrier: maxSleepUs must be in 1..1000000");
  MPI_Request req = MPI_REQUEST_NULL;
  Check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
  long sleepNs = std::min<long>(8000, long(cap) * 1000);
  for (;;) {
    int done = 0;
    Check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) break;
    timespec ts{0, sleepNs};
    nanosleep(&ts, nullptr);
    sleepNs = std::min<long>(2 * sleepNs, long(cap) * 1000);
  }
  return info.Env().Undefined();
}

// abort(code): ends every rank of the job (MPI_Abort); does not return.
Napi::Value Abort(const Napi::CallbackInfo& info) {
  const int code = static_cast<int>(sl::GetU32(info[0], "code"));
  if (!gInit || gFinal) std::exit(code);
  MPI_Abort(MPI_COMM_WORLD, code);
  return info.Env().Undefined();
}

Napi::Value Finalize(const Napi::CallbackInfo& info) {
  if (gInit && !gFinal) {
    gFinal = true;
    Check(MPI_Finalize(), "MPI_Finalize");
  }
  return info.Env().Undefined();
}

Napi::Object Register(Napi::Env env, Napi::Object exports) {
  sl::Export<Init>(env, exports, "init");
  sl::Export<Allgatherv>(env, exports, "allgatherv");
  sl::Export<AllreduceSum>(env, exports, "allreduceSum");
  sl::Export<Gatherv>(env, exports, "gatherv");
  sl::Export<Bcast>(env, exports, "bcast");
  sl::Export<Barrier>(env, exports, "barrier");
  sl::Export<IdleBarrier>(env, exports, "idleBarrier");
  sl::Export<Abort>(env, exports, "abort");
  sl::Export<Finalize>(env, exports, "finalize");
  exports.Set("abiVersion", Napi::Number::New(env, 3));
  return exports;
}

}  // namespace

NODE_API_MODULE(sublinear_mpi, Register)
