// The allreduce of a low-rank compressor (PowerSGD, Vogels et al. 2019),
// written once over a Transport (docs/architecture.md, "Low rank"). Each
// rank views its tensor as a matrix M (kernels/low_rank.h's shape) and runs
// one power-iteration step against Q, kept per residual key (warm start):
//   compress:    M = input + residual; P = M Q
//   communicate: P summed over the ranks; P orthonormalised; Q_local = M^T P;
//                Q = Q_local summed over the ranks; Q kept for the next call
//   finish:      output = P Q^T; residual = M - P Q_local^T
// Each sum is a reduce-scatter and an allgather in fp32: every element is
// added once, so every rank holds the same P and Q bits, and the local steps
// between and after have one fixed order of adds: every rank's output is the
// same bits.
//
// The residual is M - P Q_local^T, this rank's own part left out, not
// M - P Q^T: P Q_local^T = P P^T M is what this rank's M contributed to the
// sum (the sum over ranks of P Q_local^T is P Q^T), so sent + residual ==
// input + old residual holds per rank, as for every compressor (the paper's
// Algorithm 2 with a sum rather than a mean).
//
// A tensor not worth compressing (shape rank 0: SLIMREDUCE_POWERSGD_MIN_COMPRESSION),
// or a call whose summed P or Q is not finite (an inf or NaN in some rank's
// input, or an overflow), is summed exactly in fp32 instead: the same
// decision on every rank (it reads the count, or the summed bits every rank
// holds), an inf or NaN comes out where a plain sum has it, the residual
// restarts from zero and Q stays as it was.
//
// compress() and finish() call no collective; communicate() does the sums
// and the local work between them. The caller owns the workspace
// (workspace_bytes()), taken before compress() runs; finish() alone writes
// the residual, so a failed collective leaves it as it was.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/phases.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

// Where a sum of n floats over the ranks keeps one rank's block, and a
// sum's last n % ranks floats padded to one per rank.
struct SumScratch {
  float* block;
  float* tail;
};
// data (n floats) becomes its sum over the ranks: a reduce-scatter and an
// allgather of whole blocks, every element added once (the same bits on every
// rank); wire_sent grows by each as a ring allreduce of its floats.
// scratch.block holds max(n / ranks, 1) floats, scratch.tail ranks floats.
Status sum_over_ranks(backends::Transport& transport, float* data, std::size_t n,
                      const SumScratch& scratch, double* wire_sent);

// The floats of one call's sums over `ranks` ranks, for every path's
// buffers: P and Q padded with zeros to whole blocks of the rank count (one
// reduce-scatter each), and one rank's block of the larger of their sums,
// or of any sum of the call, M's included (SumScratch::block's floats).
struct LowRankSums {
  LowRankSums(const kernels::LowRankShape& shape, int ranks);
  std::size_t p_padded, q_padded;
  std::size_t factor_block;  // the larger of P's and Q's blocks
  std::size_t block;         // the same, M's too (a call summed exactly), at least 1
};

// One tensor's local work between the sums of a PowerSGD call: on the host
// (PowerSgd, below) or on a GPU with its factors staged through the host
// (core/mpi/device_low_rank.cc). Each summand lies in memory the transport
// reads, P's and Q's followed by zeros up to whole blocks of the rank count.
class LowRankStages {
 public:
  virtual ~LowRankStages() = default;
  // P = M Q, to be summed; empty where the tensor is summed exactly from the start.
  virtual std::span<float> p_summand() = 0;
  // After P's sum: *finite false when it is not (the tensor is then summed
  // exactly); else P orthonormalised and Q_local = M^T P, the next summand.
  virtual Status p_summed(bool* finite) = 0;
  virtual std::span<float> q_summand() = 0;
  // After Q's sum: *finite false when it is not (summed exactly); else Q kept.
  virtual Status q_summed(bool* finite) = 0;
  // Marks the tensor as summed exactly; *m: M, to be summed.
  virtual Status exact_summand(std::span<float>* m) = 0;
};

// The sums of one tensor's call, in order (the communicate phase of every
// path): P; Q; M exactly where the shape says so or a sum is not finite.
// The decisions read the count and summed bits, so every rank takes the
// same sums.
Status sum_low_rank(backends::Transport& transport, LowRankStages& stages,
                    const SumScratch& scratch, double* wire_sent);

// A call's Q (cols x rank floats): the key's *state (nullptr: `own`, for
// this call alone), started again from the seed when its size does not fit
// the shape (a new key, a new shape, another rank).
std::vector<float>* warm_start(const compressors::LowRankCompressor& compressor,
                               const kernels::LowRankShape& shape, std::vector<float>* state,
                               std::vector<float>& own);

class PowerSgd : public Phases<PowerSgd>, public LowRankStages {
 public:
  // rows: the tensor's real row count (the native API's), or 0: the view's choice.
  static std::size_t workspace_bytes(const compressors::LowRankCompressor& compressor,
                                     std::size_t count, int ranks, std::size_t rows = 0);

  // state: the key's Q (cols x rank floats once used), seeded when its size
  // does not fit the shape; nullptr: a seeded Q for this call alone.
  PowerSgd(backends::Transport& transport, compressors::LowRankCompressor& compressor,
           std::size_t count, std::vector<float>* state, std::byte* workspace,
           std::size_t rows = 0);

  void compress(const float* input, float* residual);
  Status communicate();
  void finish(float* output);

  // Bytes this rank hands to the transport: each sum's reduce-scatter and
  // allgather, as a ring allreduce of the summed floats.
  double wire_sent() const { return wire_sent_; }
  // Whether the call was summed exactly rather than compressed.
  bool exact() const { return exact_; }

  // The stages (LowRankStages), also for a fused batch
  // (algorithms/fused_powersgd.h) whose tensors' P (then Q, then M where
  // summed exactly) ride one sum.
  std::span<float> p_summand() override;
  Status p_summed(bool* finite) override;
  std::span<float> q_summand() override;
  Status q_summed(bool* finite) override;
  Status exact_summand(std::span<float>* m) override;

 private:
  backends::Transport& transport_;
  compressors::LowRankCompressor& compressor_;
  kernels::LowRankShape shape_;
  std::vector<float> own_q_;  // without a key's state
  std::vector<float>* q_;
  float* m_;
  float* p_;
  float* q_sum_;
  float* q_local_;
  SumScratch sums_;
  std::size_t p_padded_ = 0;
  std::size_t q_padded_ = 0;
  float* residual_ = nullptr;
  bool exact_ = false;
  double wire_sent_ = 0;
};

}  // namespace slimreduce::algorithms
