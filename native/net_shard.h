// Label-sharded training across processes (src/train/sharded.ts): the training step of net_train_slice split
// into phases, so that the ranks of an MPI job can exchange O(batch x hidden) values between them while
// each rank holds only its slice of the output layer (docs/design.md, "Label-sharded training").
//   1. net_shard_forward      (this rank's points)  the layers below the output -> H (n, d), kept in the
//                                                   thread's scratch for phase 4
//   2. net_shard_out_forward  (the global batch)    this rank's output slice: per sample, the max and sum of
//                                                   exp of its logits over the rank's active set, and the
//                                                   sum of its own labels' logits (state kept for phase 3)
//   3. net_shard_out_backward (the global batch)    from the global log-sum-exp: dz, the slice's row updates,
//                                                   dH (B, d) = this slice's part of dL/dH
//   4. net_backward_lower     (this rank's points)  dH (summed over the ranks) through the lower layers
// Phases 1 and 4 use the thread's net::Scratch (net_internal.h); phases 2 and 3 a scratch of their own, so a
// thread runs 1, 2, 3, 4 in that order without one clobbering another.
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

// net_train.cc: phase 4 (see there).
void net_backward_lower(const NetLayer* layers, uint32_t nLayers, const CsrView& data, uint32_t n, const float* dH,
                        const TrainHyper& h);

}  // namespace sl
