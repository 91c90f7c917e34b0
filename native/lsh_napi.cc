#include "modules.h"
namespace sl {
void RegisterLsh(Napi::Env env, Napi::Object exports) {}
}  // namespace sl
