// The sharded allreduce (parameter-server style, as BytePS, gTop-k and
// Ok-Topk aggregate sparse gradients), written once over a Transport
// (docs/architecture.md, "Sharded"), for a compressor's ShardedCodec
// (compressors/compressor.h): top-k when its cost model says so, int8 always.
//   compress:    this rank's tensor (+ residual) into one part per shard
//                (rank s owns shard s: the codec's bounds);
//   communicate: the parts' sizes (where they vary) and then the parts
//                themselves to their owners (alltoallv); the owner adds
//                the parts of its shard into zeros, in rank order, and
//                compresses that sum again with its owner-side residual
//                (two-way compression); the owners' results allgathered;
//   finish:      every rank decodes every owner's result into its shard.
// Every rank decodes the same bytes, so every rank holds the same bits. A
// rank sends about one payload plus the allgathered results, each about a
// payload / ranks: flat in the rank count, where the gathered algorithm
// sends (ranks - 1) payloads.
//
// Parts and results from other ranks are checked (sizes before the
// alltoallv; contents where the host can read them) before they are decoded:
// a bad one fails the call with an internal error, never a write out of
// bounds. Host buffers, blocking transports: communicate() decodes and
// compresses on the host. A stream-ordered device transport (NCCL) has the
// owner's step enqueued by the codec's device entry point
// (owner_on_device): the host never reads what arrived, so there contents
// are not checked. Sizes that vary (top-k's) are read back to the host
// there, a host wait, and checked as everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/phases.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

class ShardedAllreduce : public Phases<ShardedAllreduce> {
 public:
  // Workspace of a call of `count` values on `transport`'s ranks, this rank's.
  static std::size_t wire_bytes(const compressors::ShardedCodec& codec, std::size_t count,
                                int ranks, int rank);
  static std::size_t scratch_bytes(const compressors::ShardedCodec& codec, std::size_t count,
                                   int ranks, int rank);
  // wire_sent() of a call, from the sizes alone, for a codec whose part
  // sizes do not vary (a plan counts it before anything runs).
  static double fixed_wire_sent(const compressors::ShardedCodec& codec, std::size_t count,
                                int ranks, int rank);
  // The values of this rank's shard: the length of its owner-side residual.
  static std::size_t owned_count(const compressors::ShardedCodec& codec, std::size_t count,
                                 int ranks, int rank);

  // owner_residual: owned_count() floats kept per key (nullptr: none, as
  // without error feedback); used only when compress() gets a residual.
  // draw: this rank's for the count values (a stochastic quantizer's
  // rounding: compressors::CallDraw; the rank the communicator's, not the
  // transport's, which a hierarchical reduction's cross-node one is not).
  ShardedAllreduce(backends::Transport& transport, compressors::ShardedCodec& codec,
                   std::size_t count, float* owner_residual, std::byte* wire, std::byte* scratch,
                   const compressors::CallDraw& draw = {});

  void compress(const float* input, float* residual);
  Status communicate();
  void finish(float* output) const;

  // Bytes this rank hands to the transport: the sizes and parts it sends
  // to other ranks, and a ring allgather of one result slot.
  double wire_sent() const;

  // For a route whose compress and finish run elsewhere (a GPU's): the parts
  // go to parts() (laid out as compress_parts lays them), their sizes to
  // part_sizes() where they vary (uint64, in the wire buffer: the device
  // route's), then parts_written(), in place of compress(); after
  // communicate(), every owner's result is at results(), slot_bytes()
  // apart, for shards at bounds(). parts_bytes(): all of the parts, for a
  // codec whose sizes do not vary (known before they are made).
  std::byte* parts() { return send_; }
  std::uint64_t* part_sizes() { return sizes_; }
  std::size_t parts_bytes() const;
  void parts_written(bool feeds_back) { feeds_back_ = feeds_back; }
  const std::byte* results() const { return gathered_; }
  std::size_t slot_bytes() const { return slot_bytes_; }
  const std::vector<std::size_t>& bounds() const { return bounds_; }
  // The draw of this rank's parts (device_compress_parts takes it).
  const compressors::CallDraw& draw() const { return draw_; }
  // For a stream-ordered device transport, whose buffers (wire, scratch) are
  // device memory: the owner's step by the codec's device entry point
  // (ShardedCodec::device_owner_step), in `stream`'s order, with its device
  // scratch (device_scratch_bytes).
  void owner_on_device(const compressors::ShardedCodec& device, void* device_scratch,
                       void* stream) {
    device_owner_ = &device;
    device_scratch_ = device_scratch;
    stream_ = stream;
  }

 private:
  Status exchange_parts();
  Status check_parts() const;
  Status check_results() const;
  Status reduce_owned();  // this rank's shard summed and compressed again into result_
  // The owner's draw: its shard's, from the shard's first value.
  compressors::CallDraw owner_draw() const { return draw_.at(bounds_[transport_.rank()]); }

  backends::Transport& transport_;
  compressors::ShardedCodec& codec_;
  std::size_t count_;
  compressors::CallDraw draw_;
  std::vector<std::size_t> bounds_;      // ranks + 1
  std::size_t owned_;                    // this rank's shard: bounds_[rank + 1] - bounds_[rank]
  std::size_t part_most_;                // the most bytes one rank's part of it may take
  std::vector<std::size_t> send_bytes_;  // this rank's part of each shard
  std::vector<std::size_t> recv_bytes_;  // each rank's part of this rank's shard
  std::size_t slot_bytes_;               // one owner's result in the allgather
  float* owner_residual_;
  bool feeds_back_ = false;
  const compressors::ShardedCodec* device_owner_ = nullptr;  // owner_on_device's
  void* device_scratch_ = nullptr;
  void* stream_ = nullptr;
  std::uint64_t* sizes_;  // the parts' sizes sent, then received (where they vary)
  std::byte* send_;       // the parts, back to back in shard order
  std::byte* recv_;       // the parts of this rank's shard, in rank order
  std::byte* gathered_;   // the owners' results, slot_bytes_ apart
  float* shard_;          // this rank's shard, summed
  std::byte* result_;     // this rank's result (a slot)
};

}  // namespace slimreduce::algorithms
