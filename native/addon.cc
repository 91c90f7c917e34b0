// Entry point of the sublinear addon. NODE_API_MODULE registers a context-aware module: it loads in
// every worker thread, and no JS handle is stored in static memory (all state is per call).
#include "modules.h"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  sl::RegisterUtil(env, exports);
  sl::RegisterLsh(env, exports);
  sl::RegisterNetwork(env, exports);
  sl::RegisterShard(env, exports);
  sl::RegisterRerank(env, exports);
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  return exports;
}

NODE_API_MODULE(sublinear, Init)
