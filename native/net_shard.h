// Label-sharded training across processes (src/train/sharded.ts): the training step of net_train_slice split
// into phases, so that the ranks of an MPI job exchange O(batch x hidden) values between them while each rank
// holds only its slice of the output labels and the rows of layer 0 of its slice of the input features
// (docs/design.md, "Label-sharded training"). Every phase runs on the whole global batch; [..] is the caller's
// exchange between two phases.
//   1. netShardInput           layer 0's partial pre-activation over the rank's features: Z_r (n, o_0), no bias
//      [Z = sum over the ranks of Z_r]
//   2. netShardHidden          bias, activation and dropout of layer 0, then the layers between it and the
//                              output -> H (n, d), the same on every rank (kept in the thread's scratch)
//   3. netShardOutForward      this rank's output slice: per sample, the max and sum of exp of its logits over
//                              the rank's active set, and the sum of its own labels' logits (state kept for 4)
//      [the statistics gathered, the global log-sum-exp]
//   4. netShardOutBackward     dz, the slice's row updates, dH (n, d) = this slice's part of dL/dH
//      [dH = sum over the ranks]
//   5. netShardLowerBackward   (net_shard_lower_backward) dH through the layers below the output: the middle
//                              layers and layer 0's bias as one process updates them (alike on every rank),
//                              layer 0 in the rows of the rank's features
// Phases 1, 2 and 5 use the thread's net::Scratch (net_internal.h); 3 and 4 a scratch of their own, so a thread
// runs them in order without one clobbering another.
#pragma once
#include <napi.h>

#include <cstdint>
#include <vector>

#include "net.h"

namespace sl {

// net_napi.cc's parsers, for the bindings of net_shard.cc.
const std::vector<NetLayer>& net_parse_layers(const Napi::Value& v, bool training);
CsrView net_parse_data(const Napi::Value& v, bool labels);
void net_parse_adam(const Napi::Object& o, TrainHyper& h);
void net_parse_wide_lr(const Napi::Object& o, TrainHyper& h);  // hyper.wideLr, required

// net_train.cc: phase 5 (see there).
void net_shard_lower_backward(const NetLayer* layers, uint32_t nLayers, const CsrView& data, uint32_t n, const float* dH,
                              const TrainHyper& h, const int32_t* rowOf);

}  // namespace sl
