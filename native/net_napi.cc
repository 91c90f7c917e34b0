#include "modules.h"
namespace sl {
void RegisterNetwork(Napi::Env env, Napi::Object exports) {}
}  // namespace sl
