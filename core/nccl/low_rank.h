// PowerSGD on the NCCL path (DeviceKernels::low_rank): one call's step, all
// on the caller's stream, with no host wait. The host cannot read a sum
// before it enqueues what follows it, so where the MPI path decides on the
// summed bits (a P or Q not finite: summed exactly), this path decides on
// the device: a flag that the sums' kernels raise, and an end that gives
// NaN everywhere, zeroes the residual and keeps the key's Q
// (docs/architecture.md, "Low rank"). CUDA builds only.
#pragma once

#include <cstddef>
#include <memory>

#include "compressors/compressor.h"
#include "core/gpu/device_memory.h"
#include "core/nccl/plan.h"
#include "core/runtime/residuals.h"
#include "scheduler/plan.h"

namespace slimreduce {

// Whether a low-rank call of `count` floats is compressed here: not a tensor
// whose factors are not worth it (SLIMREDUCE_POWERSGD_MIN_COMPRESSION: NCCL
// sums it), nor one captured into a CUDA graph (cuBLAS makes its handle and
// the key its Q on the first call, which capture would not allow), which
// passes through. From the count and the stream alone, as on every rank.
bool low_rank_compresses(const compressors::Compressor& compressor, std::size_t count,
                         bool capturing);

// The key's Q on the device, made at its first call and seeded on `stream`
// (the seed from the shape alone, as on every rank); nullptr when no device
// memory could be had: the call then seeds a Q of its own.
float* key_q_on_device(ResidualSlot& slot, const compressors::Compressor& compressor,
                       std::size_t count, void* stream, DeviceAllocator& allocator);

// The workspace bytes of one low-rank call (its region).
std::size_t low_rank_region_bytes(const CallPlan& p, const compressors::Compressor& compressor);

// Bytes this rank hands to NCCL for one low-rank call: P's and Q's sums,
// each a reduce-scatter and an allgather of whole blocks.
double low_rank_wire_sent(const CallPlan& p, const compressors::Compressor& compressor);

// The call's step (after its region was assigned): before the group's
// collectives, M = input + residual and P = M Q; among them, P's
// reduce-scatter; after the group ends, P's allgather, the orthonormalisation,
// Q_local = M^T P, Q's sum, P Q^T and the residual, and the end.
std::unique_ptr<scheduler::Step> low_rank_step(const CallPlan& p,
                                               compressors::Compressor& compressor);

}  // namespace slimreduce
