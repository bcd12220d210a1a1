// What SlimReduce must return for an ncclAllReduce on the host simulation:
// compress each rank's input with its residual, sum in rank order (the
// simulated NCCL's order; a top-k sum does not depend on it), widen, divide
// for ncclAvg; hierarchically (a call's local_size), each node's fp32 sum
// first, then each shard over the nodes; int8 by shards of whole buckets,
// each owner's sum quantized again (int4, int2 alike, at their width); top-k where it shards (fp32,
// flat, not in a graph: shards_topk) by even shards, each owner's sum selected again or cast to 16
// bits. It keeps the residuals and the warm-up counts as the library does, so calls after calls
// stay exact. The casts (as_type and the fp16/bf16 compressors), top-k (k, selection, payload,
// sums) and the quantizer (8, 4 and 2 bits, absmax or min-max codes) come from
// tests/reference/independent.h and independent_packed_minmax.h, written apart
// from kernels/, so that a kernel's bug fails the runs instead of being expected by them
// (tests/unit/test_independent_reference.cc holds the kernels to the same references directly).
// PowerSGD still calls its CPU twins (kernels/low_rank.h): its result depends bit for bit on the
// order of every product's and the orthonormalisation's fp32 operations, so a second copy would be
// that code again, not a check of it; its shape (low_rank_shape) is arithmetic of sizes only. One
// model per stream of calls (not thread-safe).
#pragma once

#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/low_rank.h"
#include "tests/reference/independent.h"
#include "tests/reference/independent_packed_minmax.h"
#include "tests/reference/value_stream.h"

namespace slimreduce::hostsim {

inline std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

// The settings the library runs under (the few that matter here, read alike).
struct Mode {
  std::string compressor = env_or("SLIMREDUCE_COMPRESSOR", "none");
  bool topk = compressor == "topk";
  bool powersgd = compressor == "powersgd";
  // The quantizer, sharded at any width: int8, int4, int2, or quant at
  // SLIMREDUCE_QUANT_BITS (its first level).
  bool quant =
      compressor == "int8" || compressor == "int4" || compressor == "int2" || compressor == "quant";
  int quant_bits = compressor == "int4"    ? 4
                   : compressor == "int2"  ? 2
                   : compressor == "quant" ? std::atoi(env_or("SLIMREDUCE_QUANT_BITS", "8").c_str())
                                           : 8;
  // SLIMREDUCE_QUANT_CODES: width (min-max at 4 and 2 bits, absmax at 8), absmax or minmax.
  std::string quant_codes = env_or("SLIMREDUCE_QUANT_CODES", "width");
  // Min-max codes at the quantizer's width (8: quant8_minmax; 4 and 2: the packed ones).
  bool minmax() const {
    return quant_codes == "minmax" || (quant_codes == "width" && quant_bits != 8);
  }
  std::string topk_algorithm = env_or("SLIMREDUCE_TOPK_ALGORITHM", "auto");
  bool ef = env_or("SLIMREDUCE_ERROR_FEEDBACK", topk || powersgd || quant ? "1" : "0") == "1";
  std::size_t quant_bucket =
      static_cast<std::size_t>(std::atoi(env_or("SLIMREDUCE_QUANT_BUCKET", "512").c_str()));
  std::size_t powersgd_rank =
      static_cast<std::size_t>(std::atoi(env_or("SLIMREDUCE_POWERSGD_RANK", "4").c_str()));
  double powersgd_min_compression =
      std::atof(env_or("SLIMREDUCE_POWERSGD_MIN_COMPRESSION", "2").c_str());
  double ratio = std::atof(env_or("SLIMREDUCE_TOPK_RATIO", "0.01").c_str());
  bool fp16_values = env_or("SLIMREDUCE_TOPK_VALUES", "fp32") == "fp16";
  unsigned warmup =
      static_cast<unsigned>(std::atoi(env_or("SLIMREDUCE_WARMUP_STEPS", "0").c_str()));
  std::size_t min_bytes = 65536;  // tests run with SLIMREDUCE_MIN_BYTES=64K
  // Plain bytes here (the library also takes K, M, G suffixes).
  std::uint64_t ef_max_bytes =
      std::strtoull(env_or("SLIMREDUCE_EF_MAX_BYTES", "4294967296").c_str(), nullptr, 10);
  reference::Half format = compressor == "bf16" ? reference::Half::bf16 : reference::Half::fp16;
};

// fp32 x as a value of `type` would hold it (rounded to nearest even).
inline float as_type(float x, ncclDataType_t type) {
  namespace ref = reference;
  if (type == ncclFloat16) return ref::fp16_to_float(ref::float_to_fp16(x));
  if (type == ncclBfloat16) return ref::bf16_to_float(ref::float_to_bf16(x));
  return x;
}

// Gradient-like values with zeros and ties, the same in every process for (seed, rank).
inline std::vector<float> values_for(unsigned seed, int rank, std::size_t n, ncclDataType_t type) {
  reference::ValueStream values(std::uint64_t{seed} * 7919u +
                                static_cast<std::uint64_t>(rank) * 104729u + 1u);
  std::vector<float> v(n);
  for (float& x : v) x = as_type(values.gradient(static_cast<float>(1 + rank)), type);
  return v;
}

// int8's shards: whole buckets, as even as buckets allow, from n and the ranks alone.
inline std::vector<std::size_t> int8_bounds(std::size_t n, int ranks, std::size_t bucket) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  const auto shards = static_cast<std::size_t>(ranks);
  std::vector<std::size_t> bounds(shards + 1);
  for (std::size_t s = 0; s <= shards; ++s)
    bounds[s] = std::min((buckets / shards * s + buckets % shards * s / shards) * bucket, n);
  return bounds;
}

// Top-k's shards: even, from n and the ranks alone (TopkShards::shard_bounds).
inline std::vector<std::size_t> even_bounds(std::size_t n, int ranks) {
  const auto shards = static_cast<std::size_t>(ranks);
  std::vector<std::size_t> bounds(shards + 1);
  for (std::size_t s = 0; s <= shards; ++s) bounds[s] = n / shards * s + n % shards * s / shards;
  return bounds;
}

// Whether top-k reduces a call of n values over `ranks` sharded (where the
// NCCL path can: fp32, flat, not in a graph): SLIMREDUCE_TOPK_ALGORITHM, and
// for `auto` the cost model written out again: sharded where it sends at most
// half the gathered bytes and every owner's result is top-k.
inline bool shards_topk(const Mode& mode, std::size_t n, int ranks) {
  if (!mode.topk || mode.topk_algorithm == "gather") return false;
  if (mode.topk_algorithm == "sharded") return true;
  namespace ref = reference;
  auto payload = [&](std::size_t count) {
    return static_cast<double>(
        ref::topk_payload_bytes(ref::topk_count(count, mode.ratio), mode.fp16_values));
  };
  const std::size_t largest = (n + static_cast<std::size_t>(ranks) - 1) / ranks;
  const bool owner_dense = payload(largest) >= static_cast<double>(largest * 2);
  const double slot = 4 + (owner_dense ? static_cast<double>(largest * 2) : payload(largest));
  const double gathered = (ranks - 1) * payload(n);
  const double sharded = payload(n) * (ranks - 1) / ranks + 8.0 * (ranks - 1) + slot * (ranks - 1);
  return ranks > 2 && !owner_dense && 2 * sharded <= gathered;
}

// One call as the model sees it: the communicator's name and shape, the
// receive buffer (the residual's key), and every rank's input as fp32.
struct ModelCall {
  int comm_id = 0;
  int comm_size = 1;
  const void* recv = nullptr;
  std::size_t n = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  std::vector<std::vector<float>> inputs;  // per rank of the communicator
  // Passed through whatever its shape: a non-blocking communicator's call, or
  // one in a group with such a call (never counted for warm-up either).
  bool passes_through = false;
  float premul = 1.0f;    // an op of ncclRedOpCreatePreMulSum: its scalar
  bool captured = false;  // a replay of a graph: no residual is made or reshaped for it
  // > 1: compressed hierarchically over nodes of local_size consecutive ranks
  // (SLIMREDUCE_HIERARCHICAL=1, algorithms/hierarchical.h).
  int local_size = 0;
  // A partition of a call cut by SLIMREDUCE_PARTITION_BYTES (the whole call
  // was eligible): SLIMREDUCE_MIN_BYTES does not apply to it. Warm-up is not
  // modelled for pieces (the runs that cut have none).
  bool piece = false;
};

class Model {
 public:
  explicit Model(const Mode& mode) : mode_(mode) {}

  // What every rank's recvbuff must hold after the call, each value as fp32.
  std::vector<float> expected(const ModelCall& c) {
    std::vector<float> out = compressed(c) ? compressed_result(c) : passed_through(c);
    for (float& x : out) x = as_type(x, c.type);
    return out;
  }

  // The settings it models, for a job that changes them between calls
  // (SLIMREDUCE_ADAPTIVE's levels: top-k's ratio at each level).
  Mode& mode() { return mode_; }

  // A key evicted (SLIMREDUCE_EF_EVICT_CALLS): its residual and Q go, and
  // their room under the cap comes back; its next call starts from zero.
  void forget_key(int comm_id, const void* recv) {
    const auto found = residuals_.find({comm_id, recv});
    if (found != residuals_.end()) {
      held_bytes_ -= found->second.n * sizeof(float);
      residuals_.erase(found);
    }
    qs_.erase({comm_id, recv});
  }

  // A communicator destroyed: its residuals go, and their room under the cap comes back.
  void forget(int comm_id) {
    for (const auto& [key, residual] : residuals_) {
      if (key.first == comm_id) held_bytes_ -= residual.n * sizeof(float);
    }
    std::erase_if(residuals_, [&](const auto& kv) { return kv.first.first == comm_id; });
    std::erase_if(qs_, [&](const auto& kv) { return kv.first.first == comm_id; });
    std::erase_if(shapes_seen_, [&](const auto& kv) { return std::get<0>(kv.first) == comm_id; });
  }

 private:
  struct Residual {
    std::size_t n = 0;
    ncclDataType_t type = ncclFloat32;
    std::vector<std::vector<float>> per_rank;
    // int8 and sharded top-k: each owner's residual of its shard (made with
    // the key, zeroed). The library counts it against the cap too; no run of
    // theirs tests the cap.
    std::vector<std::vector<float>> owners;
  };

  bool compressed(const ModelCall& c) {
    if (c.passes_through) return false;
    if (mode_.compressor == "none" || (c.op != ncclSum && c.op != ncclAvg)) return false;
    const bool fp32 = c.type == ncclFloat32;
    if (!fp32 && !(mode_.topk && (c.type == ncclFloat16 || c.type == ncclBfloat16))) return false;
    if (c.n * (fp32 ? 4 : 2) < mode_.min_bytes && !c.piece) return false;
    // PowerSGD: a shape not worth it, or a call in a graph, passes through
    // (before warm-up counts).
    if (mode_.powersgd && (c.captured || low_rank_shape(c.n).rank == 0)) return false;
    // Larger than the residual cap could ever hold: passed through (before warm-up counts).
    if (mode_.ef && c.n * sizeof(float) > mode_.ef_max_bytes) return false;
    return shapes_seen_[{c.comm_id, c.n, c.type}]++ >= mode_.warmup;
  }

  // The key's residuals (every rank's), made zero when new or reshaped;
  // nullptr without error feedback, or when a new one would pass the cap or
  // would have to be made during capture (compressed without it then, and
  // nothing is kept).
  std::vector<std::vector<float>>* residual_of(const ModelCall& c) {
    if (!mode_.ef) return nullptr;
    const std::pair<int, const void*> key{c.comm_id, c.recv};
    auto found = residuals_.find(key);
    if (found != residuals_.end() && (found->second.n != c.n || found->second.type != c.type)) {
      if (c.captured) return nullptr;  // the old one stays; none in the graph
      held_bytes_ -= found->second.n * sizeof(float);
      residuals_.erase(found);
      found = residuals_.end();
    }
    if (found == residuals_.end()) {
      if (held_bytes_ + c.n * sizeof(float) > mode_.ef_max_bytes || c.captured) return nullptr;
      held_bytes_ += c.n * sizeof(float);
      Residual made{
          c.n, c.type, std::vector<std::vector<float>>(c.comm_size, std::vector<float>(c.n)), {}};
      const std::vector<std::size_t> bounds =
          mode_.quant ? int8_bounds(c.n, c.comm_size, mode_.quant_bucket)
                      : even_bounds(c.n, c.comm_size);
      const bool owners = mode_.quant || shards_topk(mode_, c.n, c.comm_size);
      for (int s = 0; owners && s < c.comm_size; ++s)
        made.owners.emplace_back(bounds[s + 1] - bounds[s], 0.0f);
      found = residuals_.emplace(key, std::move(made)).first;
    }
    return &found->second.per_rank;
  }

  std::vector<float> compressed_result(const ModelCall& c) {
    std::vector<std::vector<float>>* res = residual_of(c);
    std::vector<float> out;
    if (mode_.powersgd) {
      // The key's Q lives with its slot: kept without error feedback too,
      // none where a residual was wanted but found no room under the cap.
      const bool keyed = !mode_.ef || res;
      return low_rank(c, res, keyed ? &qs_[{c.comm_id, c.recv}] : nullptr);
    } else if (mode_.quant) {  // flat on every path's NCCL plan
      out = sharded_quant(c, res);
    } else if (shards_topk(mode_, c.n, c.comm_size) && c.type == ncclFloat32 && c.local_size <= 1 &&
               !c.captured) {
      out = sharded_topk(c, res);
    } else if (c.local_size > 1) {
      out = hierarchical(c, res);
    } else {
      std::vector<const float*> in;
      std::vector<float*> slices;
      for (int r = 0; r < c.comm_size; ++r) {
        in.push_back(c.inputs[r].data());
        slices.push_back(res ? (*res)[r].data() : nullptr);
      }
      out = summed(in, slices, c.n);
    }
    if (c.op == ncclAvg) {
      for (float& x : out) x = reference::divide_keeping_nan(x, c.comm_size);
    }
    return out;
  }

  // The compressor's flat sum of n values over the ranks in[r] (residual
  // res[r], or none), in rank order.
  std::vector<float> summed(const std::vector<const float*>& in, const std::vector<float*>& res,
                            std::size_t n) const {
    return mode_.topk ? summed_topk(in, res, n) : summed_casts(in, res, n);
  }

  std::vector<float> summed_casts(const std::vector<const float*>& in,
                                  const std::vector<float*>& res, std::size_t n) const {
    namespace ref = reference;
    std::vector<std::uint16_t> acc(n), wire(n);
    for (std::size_t r = 0; r < in.size(); ++r) {
      std::uint16_t* out = r == 0 ? acc.data() : wire.data();
      ref::cast_compress(mode_.format, in[r], res[r], out, n);
      if (r > 0) ref::cast_accumulate(mode_.format, wire.data(), acc.data(), n);
    }
    std::vector<float> sum(n);
    ref::cast_decompress(mode_.format, acc.data(), sum.data(), n);
    return sum;
  }

  std::vector<float> summed_topk(const std::vector<const float*>& in,
                                 const std::vector<float*>& res, std::size_t n) const {
    namespace ref = reference;
    const std::size_t kk = ref::topk_count(n, mode_.ratio);
    std::vector<float> sum(n, 0.0f);
    for (std::size_t r = 0; r < in.size(); ++r) {
      ref::topk_accumulate(ref::topk_compress(in[r], res[r], n, kk, mode_.fp16_values), sum.data());
    }
    return sum;
  }

  // Hierarchically: each node's fp32 sum (its ranks in order, as the
  // simulated ncclReduceScatter adds), padded with zeros to local_size equal
  // shards; shard j summed by the compressor over the nodes (in node order),
  // each node's rank j with its residual's slice of the shard's elements.
  std::vector<float> hierarchical(const ModelCall& c, std::vector<std::vector<float>>* res) const {
    const int local = c.local_size;
    const int nodes = c.comm_size / local;
    const std::size_t shard = (c.n + local - 1) / local;
    std::vector<std::vector<float>> node_sums(nodes, std::vector<float>(shard * local, 0.0f));
    for (int m = 0; m < nodes; ++m) {
      for (std::size_t i = 0; i < c.n; ++i) {
        float acc = c.inputs[m * local][i];
        for (int l = 1; l < local; ++l) acc = acc + c.inputs[m * local + l][i];
        node_sums[m][i] = acc;
      }
    }
    std::vector<float> out(c.n);
    for (int j = 0; j < local; ++j) {
      const std::size_t offset = shard * j;
      const std::size_t valid = offset >= c.n ? 0 : std::min(shard, c.n - offset);
      std::vector<std::vector<float>> slices(nodes, std::vector<float>(shard, 0.0f));
      std::vector<const float*> in;
      std::vector<float*> slice_of;
      for (int m = 0; m < nodes; ++m) {
        in.push_back(node_sums[m].data() + offset);
        if (res) std::copy_n((*res)[m * local + j].data() + offset, valid, slices[m].data());
        slice_of.push_back(res ? slices[m].data() : nullptr);
      }
      const std::vector<float> sum = summed(in, slice_of, shard);
      for (int m = 0; res && m < nodes; ++m)
        std::copy_n(slices[m].data(), valid, (*res)[m * local + j].data() + offset);
      std::copy_n(sum.data(), valid, out.data() + offset);
    }
    return out;
  }

  // One block of the quantizer at the mode's width and codes (8: quant8's
  // layouts; 4 and 2: the packed ones), and its values decoded.
  std::vector<std::uint8_t> quantized(const float* in, float* residual, std::size_t count) const {
    namespace ref = reference;
    const std::size_t bucket = mode_.quant_bucket;
    if (mode_.quant_bits == 8)
      return mode_.minmax() ? ref::quant8_minmax_compress(in, residual, count, bucket)
                            : ref::quant8_compress(in, residual, count, bucket);
    return mode_.minmax()
               ? ref::quant_packed_minmax_compress(in, residual, count, bucket, mode_.quant_bits)
               : ref::quant_packed_compress(in, residual, count, bucket, mode_.quant_bits);
  }
  std::vector<float> dequantized(const std::vector<std::uint8_t>& block, std::size_t count) const {
    namespace ref = reference;
    const std::size_t bucket = mode_.quant_bucket;
    if (mode_.quant_bits == 8)
      return mode_.minmax() ? ref::quant8_minmax_decompress(block.data(), count, bucket)
                            : ref::quant8_decompress(block.data(), count, bucket);
    return mode_.minmax()
               ? ref::quant_packed_minmax_decompress(block.data(), count, bucket, mode_.quant_bits)
               : ref::quant_packed_decompress(block.data(), count, bucket, mode_.quant_bits);
  }

  // The quantizer, sharded: every rank quantizes its slice of shard s (with
  // its residual's slice); owner s adds them into zeros in rank order and
  // quantizes the sum again (with its owner residual); every rank decodes that.
  std::vector<float> sharded_quant(const ModelCall& c, std::vector<std::vector<float>>* res) {
    namespace ref = reference;
    const std::vector<std::size_t> bounds = int8_bounds(c.n, c.comm_size, mode_.quant_bucket);
    std::vector<std::vector<float>>* owners =
        res ? &residuals_.at({c.comm_id, c.recv}).owners : nullptr;
    std::vector<float> out(c.n);
    for (int s = 0; s < c.comm_size; ++s) {
      const std::size_t begin = bounds[s], count = bounds[s + 1] - begin;
      std::vector<float> shard(count, 0.0f);
      for (int r = 0; r < c.comm_size; ++r) {
        float* residual = res ? (*res)[r].data() + begin : nullptr;
        const std::vector<float> values =
            dequantized(quantized(c.inputs[r].data() + begin, residual, count), count);
        for (std::size_t i = 0; i < count; ++i) shard[i] = ref::add_nan_first(shard[i], values[i]);
      }
      float* owner_residual = owners ? (*owners)[s].data() : nullptr;
      const std::vector<float> decoded =
          dequantized(quantized(shard.data(), owner_residual, count), count);
      std::copy(decoded.begin(), decoded.end(), out.begin() + begin);
    }
    return out;
  }

  // Top-k, sharded: every rank selects its top k with its residual; owner s
  // adds the selected values of its shard into zeros in rank order (each
  // element's adds in the order the gathered sum makes them), then compresses
  // that sum again with its owner residual: top-k of the shard, or the shard
  // in 16 bits where that is no larger (bf16 when a finite value is beyond
  // fp16's range); every rank decodes that.
  std::vector<float> sharded_topk(const ModelCall& c, std::vector<std::vector<float>>* res) {
    namespace ref = reference;
    std::vector<const float*> in;
    std::vector<float*> slices;
    for (int r = 0; r < c.comm_size; ++r) {
      in.push_back(c.inputs[r].data());
      slices.push_back(res ? (*res)[r].data() : nullptr);
    }
    const std::vector<float> sum = summed_topk(in, slices, c.n);
    std::vector<std::vector<float>>* owners =
        res ? &residuals_.at({c.comm_id, c.recv}).owners : nullptr;
    const std::vector<std::size_t> bounds = even_bounds(c.n, c.comm_size);
    std::vector<float> out(c.n, 0.0f);
    for (int s = 0; s < c.comm_size; ++s) {
      const std::size_t begin = bounds[s], count = bounds[s + 1] - begin;
      std::vector<float> shard(sum.begin() + begin, sum.begin() + begin + count);
      float* owner = owners ? (*owners)[s].data() : nullptr;
      const std::size_t kk = ref::topk_count(count, mode_.ratio);
      if (ref::topk_payload_bytes(kk, mode_.fp16_values) >= count * 2) {
        bool wide = false;
        for (std::size_t i = 0; i < count; ++i) {
          const float acc = owner ? shard[i] + owner[i] : shard[i];
          wide = wide || (std::isfinite(acc) && std::fabs(acc) >= 65520.0f);
        }
        const auto format = wide ? ref::Half::bf16 : ref::Half::fp16;
        std::vector<std::uint16_t> half(count);
        ref::cast_compress(format, shard.data(), owner, half.data(), count);
        ref::cast_decompress(format, half.data(), out.data() + begin, count);
      } else {
        ref::topk_accumulate(ref::topk_compress(shard.data(), owner, count, kk, mode_.fp16_values),
                             out.data() + begin);
      }
    }
    return out;
  }

  kernels::LowRankShape low_rank_shape(std::size_t n) const {
    return kernels::low_rank_shape(n, mode_.powersgd_rank, mode_.powersgd_min_compression);
  }

  // v (over every rank) summed in rank order, as the simulated NCCL adds.
  static std::vector<float> rank_sum(const std::vector<std::vector<float>>& v) {
    std::vector<float> sum = v[0];
    for (std::size_t r = 1; r < v.size(); ++r)
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = sum[i] + v[r][i];
    return sum;
  }

  // PowerSGD as the NCCL path runs it: M = input + residual; P = M Q summed;
  // orthonormalised; Q_local = M^T P, summed; out = P Q^T, residual = M - P
  // Q_local^T; a P or Q not finite gives NaN out, the residual zeroed and Q
  // left as it was. The products by the scalar loops, as the simulation's.
  std::vector<float> low_rank(const ModelCall& c, std::vector<std::vector<float>>* res,
                              std::pair<std::size_t, std::vector<float>>* key) const {
    namespace k = kernels;
    const k::LowRankShape s = low_rank_shape(c.n);
    std::vector<float> q(s.q_floats());
    if (key && key->first == c.n && key->second.size() == s.q_floats()) {  // else a new rank
      q = key->second;
    } else {
      k::low_rank_seed(s, q.data());
      if (key) *key = {c.n, q};
    }
    std::vector<float>* key_q = key ? &key->second : nullptr;
    const auto ranks = static_cast<std::size_t>(c.comm_size);
    std::vector<std::vector<float>> m(ranks), p(ranks, std::vector<float>(s.p_floats()));
    std::vector<std::vector<float>> q_local(ranks, std::vector<float>(s.q_floats()));
    for (std::size_t r = 0; r < ranks; ++r) {
      m[r] = c.inputs[r];
      if (res)
        for (std::size_t e = 0; e < c.n; ++e)
          m[r][e] = reference::add_nan_first(m[r][e], (*res)[r][e]);
      k::low_rank_project(m[r].data(), s, q.data(), p[r].data(), k::Isa::scalar);
    }
    std::vector<float> p_sum = rank_sum(p);
    bool bad = !k::all_finite(p_sum.data(), p_sum.size());
    k::orthonormalise(p_sum.data(), s.rows, s.rank);
    for (std::size_t r = 0; r < ranks; ++r)
      k::low_rank_back_project(m[r].data(), s, p_sum.data(), q_local[r].data(), k::Isa::scalar);
    const std::vector<float> q_sum = rank_sum(q_local);
    bad = bad || !k::all_finite(q_sum.data(), q_sum.size());
    std::vector<float> out(c.n);
    const int divisor = c.op == ncclAvg ? c.comm_size : 1;
    for (std::size_t r = 0; r < ranks; ++r) {
      float* residual = res ? (*res)[r].data() : nullptr;
      k::low_rank_finish(m[r].data(), s, p_sum.data(), q_sum.data(), q_local[r].data(), out.data(),
                         residual, k::Isa::scalar);
      k::low_rank_settle(bad, out.data(), residual, c.n, divisor, q_sum.data(),
                         key_q ? key_q->data() : nullptr, s.q_floats());
    }
    return out;
  }

  // The simulated NCCL's rank-order reduction, rounded to the type each step.
  static std::vector<float> passed_through(const ModelCall& c) {
    std::vector<float> out(c.n);
    for (std::size_t i = 0; i < c.n; ++i) {
      const bool premul = c.op >= ncclNumOps;
      float acc = premul ? c.premul * c.inputs[0][i] : c.inputs[0][i];
      for (int r = 1; r < c.comm_size; ++r) {
        const float x = premul ? c.premul * c.inputs[r][i] : c.inputs[r][i];
        acc = as_type(c.op == ncclMax ? (acc < x ? x : acc) : acc + x, c.type);
      }
      out[i] = c.op == ncclAvg ? acc / static_cast<float>(c.comm_size) : acc;
    }
    return out;
  }

  Mode mode_;
  std::map<std::pair<int, const void*>, Residual> residuals_;
  std::uint64_t held_bytes_ = 0;  // residual bytes this process holds, as the library counts them
  std::map<std::tuple<int, std::size_t, int>, unsigned> shapes_seen_;
  // PowerSGD's Q per key, with the count it was made for (a new count resets the key).
  std::map<std::pair<int, const void*>, std::pair<std::size_t, std::vector<float>>> qs_;
};

}  // namespace slimreduce::hostsim
