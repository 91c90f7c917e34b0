// Bindings: topK(scores, rows, cols, k, outIdx, outVal) and cpuFeatures().
#include "modules.h"
#include "napi_util.h"
#include "topk.h"

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#if defined(__x86_64__)
#define SL_ARCH "x64"
#elif defined(__aarch64__)
#define SL_ARCH "arm64"
#else
#define SL_ARCH "other"
#endif

namespace sl {

// topK(scores: Float32Array (rows, cols), rows, cols, k, outIdx: Uint32Array (rows, k), outVal: Float32Array (rows, k))
static Napi::Value TopK(const Napi::CallbackInfo& info) {
  uint32_t rows = GetU32(info[1], "rows"), cols = GetU32(info[2], "cols"), k = GetU32(info[3], "k");
  auto scores = GetArray<float>(info[0], "scores", size_t(rows) * cols);
  auto outIdx = GetArray<uint32_t>(info[4], "outIdx", size_t(rows) * k);
  auto outVal = GetArray<float>(info[5], "outVal", size_t(rows) * k);
  for (size_t r = 0; r < rows; ++r)
    topk_row(outIdx.data + r * k, outVal.data + r * k, scores.data + r * cols, nullptr, cols, k);
  return info.Env().Undefined();
}

static Napi::Value CpuFeatures(const Napi::CallbackInfo& info) {
  Napi::Object o = Napi::Object::New(info.Env());
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  o.Set("avx2", Napi::Boolean::New(info.Env(), __builtin_cpu_supports("avx2")));
  o.Set("fma", Napi::Boolean::New(info.Env(), __builtin_cpu_supports("fma")));
  o.Set("avx512f", Napi::Boolean::New(info.Env(), __builtin_cpu_supports("avx512f")));
#else
  o.Set("avx2", Napi::Boolean::New(info.Env(), false));
  o.Set("fma", Napi::Boolean::New(info.Env(), false));
  o.Set("avx512f", Napi::Boolean::New(info.Env(), false));
#endif
#if defined(__aarch64__) && defined(__linux__)
  o.Set("neon", Napi::Boolean::New(info.Env(), (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0));
#else
  o.Set("neon", Napi::Boolean::New(info.Env(), false));
#endif
  o.Set("arch", Napi::String::New(info.Env(), SL_ARCH));
  return o;
}

void RegisterUtil(Napi::Env env, Napi::Object exports) {
  Export<TopK>(env, exports, "topK");
  Export<CpuFeatures>(env, exports, "cpuFeatures");
}

}  // namespace sl
