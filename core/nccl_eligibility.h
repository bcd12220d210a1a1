// Which ncclAllReduce calls SlimReduce may compress (design invariant 2, NCCL
// side), from facts every rank derives alike from its arguments. Pure logic:
// no NCCL or CUDA header, so it is tested on any machine.
#pragma once

#include <cstdint>
#include <string>

#include "core/settings.h"

namespace slimreduce {

// ncclDataType_t and ncclRedOp_t values we act on (stable in nccl.h since 2.x;
// core/nccl_engine.cc checks them against the header at compile time).
inline constexpr int kNcclFloat16 = 6;
inline constexpr int kNcclFloat32 = 7;
inline constexpr int kNcclBfloat16 = 9;
inline constexpr int kNcclSum = 0;
inline constexpr int kNcclAvg = 4;

// The GPU kernels a compressor name maps to; unknown: no GPU kernel (yet).
enum class GpuCompressor { none, fp16, bf16, topk, unknown };
GpuCompressor gpu_compressor(const std::string& name);

enum class NcclElem { fp32, fp16, bf16, other };
NcclElem nccl_elem(int datatype);
std::uint64_t nccl_elem_bytes(NcclElem elem);  // 0 for other

struct NcclCallFacts {
  int datatype = -1;
  int op = -1;
  std::uint64_t count = 0;
  bool device_buffers = false;  // send and receive buffers are device (or managed) memory
  bool blocking_comm = false;   // a communicator we saw created, in blocking mode
  int comm_size = 0;            // ranks in the communicator (0: unknown)
};

enum class NcclPath { pass_through, cast, topk };

struct NcclVerdict {
  NcclPath path = NcclPath::pass_through;
  bool average = false;  // ncclAvg: divide by the rank count once, after the sum
  const char* reason = "";
};

// What to do with one ncclAllReduce. Later steps may still pass an eligible
// call through (warm-up, residual cap, graph capture without workspace); they
// too decide from call history only.
NcclVerdict classify_nccl(const NcclCallFacts& facts, const Settings& settings);

}  // namespace slimreduce
