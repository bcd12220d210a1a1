// The input of every rank and the float64 reference it sums to. The input is
// a pure function of (rank, index), so rank 0 can rebuild every rank's input
// and check a result without any extra communication or stored reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace slimreduce::bench {

// Element i of rank r: uniform in [-1, 1), 24 significant bits, so exactly a float.
float input_value(int rank, std::size_t index);
void fill_input(int rank, float* out, std::size_t count);

// How a result is judged: the bound a compressor promises.
enum class Bound {
  exact_sum,   // passed through: MPI's own float sum, n float roundings at most
  cast_fp16,   // ring with fp16 on the wire
  cast_bf16,   // ring with bf16 on the wire
  topk_first,  // top-k with no residual: exactly the sum of every rank's top k
  topk_step,   // top-k with a residual: structural checks only (see the .cc)
  quant8,      // int8: each rank's and each owner's 8-bit steps (inputs in [-1, 1))
  none_known,  // a compressor this bench does not know: measured, not judged
};

struct Judgement {
  double error = 0;  // the metric below
  bool ok = true;
  std::string why;  // the first violation, for the message
};

// Dense metric (pass-through and casts): max over i of |out_i - ref_i| / sum_r |x_r,i|.
// Top-k metric: ||out - ref||_2 / ||ref||_2 (relative L2 error of the step).
bool uses_l2_metric(Bound bound);

struct TopkShape {
  std::size_t k = 0;         // values each rank sends (of a whole call)
  bool fp16_values = false;  // SLIMREDUCE_TOPK_VALUES=fp16
  double ratio = 0;          // SLIMREDUCE_TOPK_RATIO, for each piece's and shard's k
  std::size_t pieces = 1;    // the partitions the call was cut into
  bool sharded = false;      // reduced by the sharded algorithm (SLIMREDUCE_TOPK_ALGORITHM)
};

// The kernel's k = ceil(ratio x n), at least 1, at most n.
inline std::size_t topk_k(std::size_t n, double ratio) {
  const double x = ratio * double(n);
  if (!(x > 1.0)) return 1;
  return std::min(n, std::size_t(std::ceil(x)));
}

// Judges `out` (count values, the allreduce over `ranks` ranks) against the
// reference; `topk` is read only for the top-k bounds.
Judgement judge(const float* out, std::size_t count, int ranks, Bound bound, const TopkShape& topk);

// A 64-bit digest of the result bits, to check that every rank got the same.
std::uint64_t digest(const float* values, std::size_t count);

}  // namespace slimreduce::bench
