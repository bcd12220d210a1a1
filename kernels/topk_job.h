// Internal to the top-k kernel: what the driver (topk.cc) and the per-thread
// passes over the input (topk_pass.cc) share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "kernels/element_rules.h"
#include "kernels/topk.h"
#include "kernels/topk_scan.h"

namespace slimreduce::kernels::topk_detail {

// Four interleaved copies of each histogram, so runs of equal bins (zeros,
// constant regions) don't serialize on one counter's store-to-load latency.
inline constexpr std::size_t kSubs = 4;
inline constexpr std::size_t kMaxBins = 2048;
inline constexpr std::size_t kHistStride = kSubs * kMaxBins;

// Radix levels over the 31 key bits: 11 + 10 + 10.
struct Level {
  int shift;
  std::uint32_t bins;
};
inline constexpr Level kLevels[] = {{kFirstShift, 2048}, {10, 1024}, {0, 1024}};

// Writes payload entries and fuses the residual update of selected entries.
class PayloadWriter {
 public:
  PayloadWriter(void* payload, std::size_t k, TopkValues values, float* residual)
      : index_(static_cast<std::uint8_t*>(payload)),
        value_(index_ + k * sizeof(std::uint32_t)),
        fp16_(values == TopkValues::fp16),
        residual_(residual) {}

  // The value's bits as they travel (fp16 in the low half), with the residual
  // update: residual = acc - sent, 0 where sent is not finite.
  std::uint32_t encode(std::uint32_t index, float acc) const {
    float sent = acc;
    std::uint32_t bits = float_bits(acc);
    if (fp16_) {
      bits = float_to_fp16_bits(acc);
      sent = fp16_bits_to_float(static_cast<std::uint16_t>(bits));
    }
    if (residual_) residual_[index] = residual_after(acc, sent);
    return bits;
  }

  void put(std::size_t pos, std::uint32_t index, float acc) const {
    store(pos, index, encode(index, acc));
  }

  void store(std::size_t pos, std::uint32_t index, std::uint32_t bits) const {
    std::memcpy(index_ + pos * sizeof index, &index, sizeof index);
    if (fp16_) {
      const auto h = static_cast<std::uint16_t>(bits);
      std::memcpy(value_ + pos * sizeof h, &h, sizeof h);
    } else {
      std::memcpy(value_ + pos * sizeof bits, &bits, sizeof bits);
    }
  }

  // Merges `count` entries (ascending indices; encode()d bits carried in float
  // storage) into the payload, whose first `written` entries are in place:
  // from the back, so nothing is overwritten before it moves, and branch-free,
  // since which side comes next is as good as random.
  void merge(std::size_t written, const std::uint32_t* index, const float* bits,
             std::size_t count) const {
    if (fp16_) {
      merge_values<std::uint16_t>(written, index, bits, count);
    } else {
      merge_values<std::uint32_t>(written, index, bits, count);
    }
  }

  // For writes encode() will do out of scan order, where each would miss cache.
  void prefetch_residual(std::uint32_t index) const {
    if (residual_) __builtin_prefetch(residual_ + index, 1);
  }

 private:
  template <class V>
  void merge_values(std::size_t i, const std::uint32_t* index, const float* bits,
                    std::size_t j) const {
    auto load = [](const std::uint8_t* base, std::size_t pos, auto v) {
      std::memcpy(&v, base + pos * sizeof v, sizeof v);
      return v;
    };
    auto store = [](std::uint8_t* base, std::size_t pos, auto v) {
      std::memcpy(base + pos * sizeof v, &v, sizeof v);
    };
    // The pick is done with masks: compilers turn a ?: here into a branch.
    std::uint8_t* const ix = index_;  // Locals: stores through bytes may alias members.
    std::uint8_t* const vx = value_;
    for (std::size_t w = i + j; i > 0 && j > 0;) {
      --w;
      const std::uint32_t mine = load(ix, i - 1, std::uint32_t{});
      const std::uint32_t mine_val = load(vx, i - 1, V{});
      const std::uint32_t theirs = index[j - 1];
      const std::uint32_t their_val = static_cast<V>(float_bits(bits[j - 1]));
      const std::uint32_t take_mine = mine > theirs;
      const std::uint32_t mask = 0u - take_mine;
      store(ix, w, (mine & mask) | (theirs & ~mask));
      store(vx, w, static_cast<V>((mine_val & mask) | (their_val & ~mask)));
      i -= take_mine;
      j -= 1 - take_mine;
    }
    // Left over: entries of `index` (below all of the payload's), or else the
    // payload's own, which are already where they belong.
    for (; j > 0; --j) {
      store(ix, j - 1, index[j - 1]);
      store(vx, j - 1, static_cast<V>(float_bits(bits[j - 1])));
    }
  }

  std::uint8_t* index_;
  std::uint8_t* value_;
  bool fp16_;
  float* residual_;
};

// What the selection passes share: the buffers, k, the threads, and the
// per-thread arrays in scratch.
struct PassShared {
  const float* in;
  float* residual;
  const float* src;  // acc after pass 1: residual, or in when there is none.
  std::size_t n;
  std::size_t k;
  TopkTuning tuning;
  unsigned threads;
  PayloadWriter out;
  TopkScratch& scratch;

  // Thread t scans [begin(t), begin(t + 1)); boundaries on 64-element (256-byte)
  // steps so threads never write the same cache line of residual.
  std::size_t begin(unsigned t) const {
    if (t >= threads) return n;
    const std::size_t even = n / threads * t + n % threads * t / threads;  // n * t / threads.
    return even & ~std::size_t{63};
  }
  std::uint32_t* hist(unsigned t) const { return scratch.hist.data() + t * kHistStride; }
  std::uint64_t* merged() const { return scratch.counts.data(); }
  std::uint64_t* above(unsigned t) const { return merged() + kMaxBins + t; }
  std::uint64_t* in_band(unsigned t) const { return above(threads) + t; }
  std::uint64_t* offset(unsigned t) const { return in_band(threads) + t; }
  std::uint64_t* quota(unsigned t) const { return offset(threads) + t; }
};

// Runs fn(t) for t < threads, thread 0 on the caller. A thread the system
// refuses runs its share on the caller afterwards: slower, same bytes.
template <class Fn>
void run_threads(unsigned threads, const Fn& fn) {
  std::vector<std::thread> pool;
  std::vector<unsigned> refused;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back([&fn, t] { fn(t); });
    } catch (const std::system_error&) {
      refused.push_back(t);
    }
  }
  fn(0);
  for (std::thread& th : pool) th.join();
  for (unsigned t : refused) fn(t);
}

// Pass 1 over [b, e): acc into residual, and into h the level-0 histogram of
// the keys >= floor (floor is a multiple of the level-0 bin width).
void pass_accumulate(const PassShared& shared, std::size_t b, std::size_t e, std::uint32_t floor,
                     std::uint32_t* h);

// Histogram of radix `level` over the keys of data[b, e) in the band. With
// keep, adds to the counts already in h (its first sub-histogram).
void pass_level(Isa isa, const float* data, std::size_t b, std::size_t e, Band band, int level,
                bool keep, std::uint32_t* h);

// Writes the selected entries of [b, e) from payload position `pos`: all keys
// above the band and the first `quota` keys in it.
void pass_compact(const PassShared& shared, std::size_t b, std::size_t e, Band band,
                  std::uint64_t quota, std::uint64_t pos);

// Writes the entries of [b, e) above the band to the payload from `pos` and
// copies those in the band to the candidate arrays from `cand`.
void pass_collect(const PassShared& shared, std::size_t b, std::size_t e, Band band,
                  std::uint64_t pos, std::uint64_t cand);

}  // namespace slimreduce::kernels::topk_detail
