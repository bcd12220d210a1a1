// slimreduce-model: the cost model's predictions (core/runtime/cost_model.h,
// docs/scaling.md) for a link, a layout of ranks and tensor sizes: each
// compressor's predicted time per call, its algorithm, the bytes a rank
// sends, and the choice (the least time). Model output, not a measurement.
//
//   slimreduce-model [--link 10gbit] [--intra 200gbit] [--latency-us 20]
//                    [--intra-latency-us 2] [--ranks 8,64,1024] [--per-node 8] [--cores N]
//                    [--shared] [--hierarchical] [--sizes 1M,16M,64M]
//                    [--compressors none,fp16,int8,topk:0.01,powersgd:4]
//                    (topk:0.01:gather, topk:0.01:sharded: top-k's aggregation forced)
//                    [--rate NAME=COMPRESS/DECODE (GB/s of fp32)]... [--no-measure]
// Compression rates are measured on this machine's CPU at start (4M values,
// the host entry points) unless --no-measure or --rate gives them.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "compressors/kind.h"
#include "core/runtime/compressor_choice.h"
#include "core/runtime/cost_model.h"
#include "core/runtime/settings.h"

namespace {

using slimreduce::cost::Link;
using slimreduce::cost::Rates;

// Rates for --no-measure (and PowerSGD, never measured here): the CPU
// kernels' on this project's 2-core AVX-512 EPYC (docs/performance.md
// sections 7 and 17, 16 MiB, with error feedback where the compressor has it
// by default; PowerSGD from the demo's wall time): fp32 input compressed,
// and decoded, a second.
const std::map<std::string, Rates>& default_rates() {
  static const std::map<std::string, Rates> rates = {
      {"fp16", {10.8e9, 5.5e9}}, {"bf16", {12.6e9, 6.2e9}},   {"int8", {6.8e9, 21.5e9}},
      {"int4", {8.0e9, 25e9}},   {"int2", {8.0e9, 25e9}},     {"fp8", {8.0e9, 20e9}},
      {"topk", {2.7e9, 5.0e9}},  {"powersgd", {0.5e9, 0.5e9}}};
  return rates;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

// "10gbit", "100mbit", "1.5gbit": bytes a second.
std::optional<double> parse_rate(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || value <= 0) return std::nullopt;
  const std::string unit = end;
  const double bits = unit == "gbit" ? 1e9 : unit == "mbit" ? 1e6 : unit == "kbit" ? 1e3 : 0;
  if (bits == 0) return std::nullopt;
  return value * bits / 8;
}

// "64K", "1MiB", "65536": bytes, as the settings read them (parse_byte_size).
std::optional<std::uint64_t> parse_bytes(const std::string& text) {
  try {
    return slimreduce::parse_byte_size(text);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

// The median of three timings of `work`, in seconds.
template <typename Work>
double median_seconds(Work&& work) {
  double t[3];
  for (double& one : t) {
    const auto begin = std::chrono::steady_clock::now();
    work();
    one = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  }
  std::sort(t, t + 3);
  return t[1];
}

// This machine's rates for the compressor's host entry points (the
// library's CPU path) at n values: compress (with a residual where the
// compressor feeds back error by default) and decode, fp32 bytes a second.
// A low-rank compressor keeps `fallback` (its products are not one kernel).
Rates measured_rates(slimreduce::compressors::Compressor& c, std::size_t n, Rates fallback) {
  namespace cs = slimreduce::compressors;
  std::vector<float> in(n), residual(n, 0.0f), dense(n);
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (float& x : in) {  // splitmix64, centred: a gradient-like spread of signs and sizes
    state += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = (state ^ (state >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    x = static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 - 0.5);
  }
  float* feedback = c.default_error_feedback() ? residual.data() : nullptr;
  const double bytes = 4.0 * static_cast<double>(n);
  switch (c.aggregation()) {
    case cs::Aggregation::summable: {
      auto& summable = cs::kind_cast<cs::SummableCompressor>(c);
      std::vector<std::byte> wire(c.compressed_bytes(n));
      const double compress =
          median_seconds([&] { summable.compress(in.data(), feedback, n, wire.data()); });
      const double decode =
          median_seconds([&] { summable.decompress(wire.data(), dense.data(), n); });
      return {bytes / compress, bytes / decode};
    }
    case cs::Aggregation::gathered: {
      auto& gathered = cs::kind_cast<cs::GatheredCompressor>(c);
      std::vector<std::byte> payload(c.compressed_bytes(n));
      const double compress =
          median_seconds([&] { gathered.compress(in.data(), feedback, n, payload.data()); });
      const double decode = median_seconds([&] {
        std::fill(dense.begin(), dense.end(), 0.0f);
        gathered.accumulate(payload.data(), n, dense.data());
      });
      return {bytes / compress, bytes / decode};
    }
    case cs::Aggregation::sharded: {
      cs::ShardedCodec& codec = *c.sharded_codec();
      const std::size_t bounds[2] = {0, n};
      std::size_t part_bytes[1] = {0};
      std::vector<std::byte> parts(codec.parts_capacity(n, 1)), result(codec.owner_bytes(n, n));
      const double compress = median_seconds([&] {
        codec.compress_parts(in.data(), feedback, n, bounds, 1, parts.data(), part_bytes, {});
      });
      std::vector<float> sum = in;
      codec.owner_compress(sum.data(), nullptr, n, n, result.data(), {});
      const double decode =
          median_seconds([&] { codec.owner_decode(result.data(), n, n, dense.data()); });
      return {bytes / compress, bytes / decode};
    }
    case cs::Aggregation::low_rank:
      break;
  }
  return fallback;
}

struct Candidate {
  std::string label;
  std::unique_ptr<slimreduce::compressors::Compressor> compressor;  // nullptr: none
  Rates rates;
};

// "none", "fp16", "topk:0.01", "powersgd:4", "int4", ...: nullopt when unknown.
std::optional<Candidate> candidate_named(const std::string& label,
                                         const std::map<std::string, Rates>& rates, bool measure) {
  Candidate c;
  c.label = label;
  if (label == "none") return c;
  const std::string name = label.substr(0, label.find(':'));
  slimreduce::Settings settings;
  if (label.find(':') != std::string::npos) {
    const double value = std::atof(label.c_str() + label.find(':') + 1);
    if (name == "topk") settings.topk_ratio = value;
    if (name == "powersgd") settings.powersgd_rank = static_cast<int>(value);
  }
  // "topk:0.01:gather" or "topk:0.01:sharded": top-k's aggregation forced
  // (SLIMREDUCE_TOPK_ALGORITHM); without it, chosen as the library chooses.
  const std::size_t second = label.find(':', label.find(':') + 1);
  if (name == "topk" && second != std::string::npos) {
    const std::string how = label.substr(second + 1);
    if (how != "gather" && how != "sharded") return std::nullopt;
    settings.topk_algorithm = how == "gather" ? slimreduce::compressors::TopkAlgorithm::gather
                                              : slimreduce::compressors::TopkAlgorithm::sharded;
  }
  c.compressor = slimreduce::compressor_named(name, settings);
  if (!c.compressor) return std::nullopt;
  if (const auto found = rates.find(name); found != rates.end()) c.rates = found->second;
  if (measure) c.rates = measured_rates(*c.compressor, std::size_t{4} << 20, c.rates);
  return c;
}

int usage(const char* why) {
  std::fprintf(
      stderr,
      "slimreduce-model: %s\nusage: slimreduce-model [--link 10gbit] [--intra 200gbit] "
      "[--latency-us 20] [--intra-latency-us 2] [--ranks 8,64,1024] [--per-node 8] [--cores N] "
      "[--shared] [--hierarchical] [--sizes 1M,16M,64M] "
      "[--compressors none,fp16,int8,topk:0.01,powersgd:4] [--rate NAME=C/D]... "
      "[--no-measure]\n",
      why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Link inter{*parse_rate("10gbit"), 20e-6}, intra{*parse_rate("200gbit"), 2e-6};
  std::vector<int> ranks = {8, 64, 1024};
  slimreduce::cost::Layout layout;
  layout.per_node = 8;
  bool hierarchical = false;
  bool measure = true;  // the rates of this machine's kernels, unless --no-measure or --rate
  std::vector<std::uint64_t> sizes = {1 << 20, 16 << 20, 64 << 20};
  std::string compressors = "none,fp16,int8,topk:0.01,powersgd:4";
  std::map<std::string, Rates> rates = default_rates();
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    const std::string value = has_value ? argv[i + 1] : "";
    if (flag == "--shared") {
      layout.shared_link = true;
      continue;
    }
    if (flag == "--hierarchical") {
      hierarchical = true;
      continue;
    }
    if (flag == "--no-measure") {
      measure = false;
      continue;
    }
    if (!has_value) return usage(("no value for " + flag).c_str());
    ++i;
    if (flag == "--link" || flag == "--intra") {
      const auto rate = parse_rate(value);
      if (!rate) return usage(("not a rate: " + value).c_str());
      (flag == "--link" ? inter : intra).bytes_per_s = *rate;
    } else if (flag == "--latency-us" || flag == "--intra-latency-us") {
      (flag == "--latency-us" ? inter : intra).latency_s = std::atof(value.c_str()) * 1e-6;
    } else if (flag == "--ranks") {
      ranks.clear();
      for (const std::string& r : split(value)) ranks.push_back(std::atoi(r.c_str()));
    } else if (flag == "--per-node") {
      layout.per_node = std::atoi(value.c_str());
    } else if (flag == "--cores") {
      layout.cores_per_node = std::atoi(value.c_str());
    } else if (flag == "--sizes") {
      sizes.clear();
      for (const std::string& s : split(value)) {
        const auto bytes = parse_bytes(s);
        if (!bytes || *bytes < 4) return usage(("not a size: " + s).c_str());
        sizes.push_back(*bytes);
      }
    } else if (flag == "--compressors") {
      compressors = value;
    } else if (flag == "--rate") {
      const auto eq = value.find('='), slash = value.find('/');
      if (eq == std::string::npos || slash == std::string::npos || slash < eq)
        return usage(("--rate takes NAME=COMPRESS/DECODE: " + value).c_str());
      rates[value.substr(0, eq)] = {std::atof(value.c_str() + eq + 1) * 1e9,
                                    std::atof(value.c_str() + slash + 1) * 1e9};
      measure = false;
    } else {
      return usage(("unknown option " + flag).c_str());
    }
  }
  if (layout.per_node < 1) return usage("--per-node must be at least 1");
  std::vector<Candidate> candidates;
  for (const std::string& label : split(compressors)) {
    auto made = candidate_named(label, rates, measure);
    if (!made) return usage(("unknown compressor " + label).c_str());
    candidates.push_back(std::move(*made));
  }
  std::printf("# model output (core/runtime/cost_model.h), not a measurement\n");
  std::printf(
      "# link %.3g Gbit/s, %.0f us a message%s; inside a node %.3g Gbit/s; %d ranks a node; %s\n",
      inter.bytes_per_s * 8 / 1e9, inter.latency_s * 1e6,
      layout.shared_link ? " (one link under every rank)" : "", intra.bytes_per_s * 8 / 1e9,
      layout.per_node,
      layout.cores_per_node > 0 ? (std::to_string(layout.cores_per_node) + " cores a node").c_str()
                                : "a core each");
  for (const Candidate& c : candidates) {
    if (c.compressor)
      std::printf(
          "# %s: compress %.2f GB/s, decode %.2f GB/s of fp32 (%s)\n", c.label.c_str(),
          c.rates.compress / 1e9, c.rates.decode / 1e9,
          measure && c.compressor->aggregation() != slimreduce::compressors::Aggregation::low_rank
              ? "measured now, 4M values, this CPU"
              : "given");
  }
  std::printf("%6s %10s %-12s %-28s %12s %10s %10s %10s %8s\n", "ranks", "bytes", "compressor",
              "algorithm", "MB sent", "compute ms", "wire ms", "total ms", "vs none");
  for (const int r : ranks) {
    if (r < 2) return usage("--ranks: at least 2 each");
    layout.ranks = r;
    for (const std::uint64_t bytes : sizes) {
      double none_s = 0, best_s = 0;
      std::string best;
      for (const Candidate& c : candidates) {
        const auto p = slimreduce::cost::predict(c.compressor.get(), bytes / 4, layout, inter,
                                                 intra, c.rates, hierarchical);
        if (!c.compressor) none_s = p.total_s();
        if (best.empty() || p.total_s() < best_s) {
          best = c.label;
          best_s = p.total_s();
        }
        std::printf(
            "%6d %10llu %-12s %-28s %12.3f %10.3f %10.3f %10.3f %8s\n", r,
            static_cast<unsigned long long>(bytes), c.label.c_str(), p.algorithm.c_str(),
            p.wire_bytes / 1e6, p.compute_s * 1e3, p.wire_s * 1e3, p.total_s() * 1e3,
            none_s > 0 ? (std::to_string(none_s / p.total_s()).substr(0, 5) + "x").c_str() : "");
      }
      std::printf("%6d %10llu choice: %s\n", r, static_cast<unsigned long long>(bytes),
                  best.c_str());
    }
  }
  return 0;
}
