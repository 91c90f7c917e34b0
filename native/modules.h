// Each native concept registers its own bindings; addon.cc calls them all.
#pragma once
#include <napi.h>

namespace sl {
void RegisterUtil(Napi::Env env, Napi::Object exports);     // util_napi.cc: topK, cpuFeatures
void RegisterLsh(Napi::Env env, Napi::Object exports);      // lsh_napi.cc: hashing, tables
void RegisterNetwork(Napi::Env env, Napi::Object exports);  // net_napi.cc: train/predict slices
void RegisterShard(Napi::Env env, Napi::Object exports);    // net_shard.cc: label-sharded training phases
void RegisterRerank(Napi::Env env, Napi::Object exports);   // net_rerank.cc: the re-ranker (per-label SVMs on shortlists)
}  // namespace sl
