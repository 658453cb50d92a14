//===- TrainRows.h - the positions of a training row ------------*- C++ -*-===//
//
// What the compiler traces and the runtime fills: batch_size rows of this
// many positions.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_PROTO_TRAINROWS_H
#define TWILL_PROTO_TRAINROWS_H

#include "proto/job_config.pb.h"

namespace twill {

/// train.seq_len, or under DPO a pair's chosen and rejected sequences side
/// by side, seq_len positions each.
inline int64_t rowLength(const TrainConfig &train) {
  return train.seq_len() * (train.objective() == TrainConfig::DPO ? 2 : 1);
}

} // namespace twill

#endif // TWILL_PROTO_TRAINROWS_H
