// Exact top-k by radix select on the 31-bit magnitude key, never a sort:
//   pass 1   acc = in + residual (stored back to residual), histogram of the
//            top 11 key bits; the bins above the k-th key are selected whole,
//            the bin holding it is the threshold bucket. Keys below a floor
//            estimated from a small sample are not counted (most of them, at
//            small ratios); if the floor proves too high, one pass counts them.
//   refine   while the bucket is too big to copy out, one more full pass
//            histograms the next 10 bits of the keys in it (rare: heavy ties,
//            e.g. mostly zeros).
//   collect  one full pass writes the selected entries straight to the
//            payload and copies the bucket's entries to scratch; the bucket is
//            refined there and its winners merged into the payload.
//   compact  instead, once the bucket is known to be taken whole or is a
//            single key, one full pass writes the payload directly.
// Large inputs split into per-thread index ranges with per-thread counts, so
// each thread knows where its output starts and which of the tied entries
// (the lowest indices overall) are its to take.
#include "kernels/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>

#ifdef __linux__
#include <sched.h>
#endif

#include "kernels/element_rules.h"
#include "kernels/topk_job.h"

namespace slimreduce::kernels {
namespace {

using namespace topk_detail;

// Below this many elements a second thread costs more than it saves.
constexpr std::size_t kThreadMinElements = std::size_t{1} << 20;
constexpr std::size_t kElementsPerThread = std::size_t{1} << 19;
// Memory bandwidth is saturated well before this many threads.
constexpr unsigned kMaxThreads = 16;

// Where the search stands: keys above band.hi are selected, `need` more come
// from the `in_band` keys inside the band.
struct Selection {
  Band band{0, 0x7fffffffu};
  int level = -1;  // Deepest radix level resolved.
  std::uint64_t need = 0;
  std::uint64_t in_band = 0;

  // The band is taken whole, or is one key (ties then go by index).
  bool exact() const { return need == in_band || (level >= 0 && kLevels[level].shift == 0); }
};

// The CPUs this process may run on: an MPI rank pinned to one core gets no
// helper threads fighting it for that core.
unsigned usable_cpus() {
  unsigned cpus = std::thread::hardware_concurrency();
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const auto allowed = static_cast<unsigned>(CPU_COUNT(&set));
    cpus = cpus ? std::min(cpus, allowed) : allowed;
  }
#endif
  return std::max(1u, cpus);
}

unsigned pick_threads(std::size_t n, unsigned requested) {
  if (requested) return std::min(requested, 256u);
  if (n < kThreadMinElements) return 1;
  const unsigned hw = usable_cpus();
  const std::size_t by_size = n / kElementsPerThread;
  return static_cast<unsigned>(std::min<std::size_t>({hw, by_size, kMaxThreads}));
}

// Picks the bin at `level` that holds the need-th largest key of the band from
// the per-thread histograms, and moves each thread's counts to the new band.
void descend(const PassShared& shared, Selection& sel, int level, unsigned threads) {
  const Level lv = kLevels[level];
  std::uint64_t* merged = shared.merged();
  for (std::uint32_t b = 0; b < lv.bins; ++b) {
    std::uint64_t sum = 0;
    for (unsigned t = 0; t < threads; ++t) sum += shared.hist(t)[b];
    merged[b] = sum;
  }
  std::uint64_t cum = 0;
  std::uint32_t pick = lv.bins - 1;
  while (cum + merged[pick] < sel.need) cum += merged[pick--];  // need <= in_band: stops.
  for (unsigned t = 0; t < threads; ++t) {
    const std::uint32_t* h = shared.hist(t);
    for (std::uint32_t b = pick + 1; b < lv.bins; ++b) *shared.above(t) += h[b];
    *shared.in_band(t) = h[pick];
  }
  sel.need -= cum;
  sel.in_band = merged[pick];
  sel.level = level;
  sel.band.lo |= pick << lv.shift;
  sel.band.hi = sel.band.lo | ((1u << lv.shift) - 1u);
}

// Threads' output offsets: each takes its keys above the band and its share of
// the `need` tied keys, lowest indices first.
void plan_compact(const PassShared& shared, std::uint64_t need) {
  std::uint64_t offset = 0;
  for (unsigned t = 0; t < shared.threads; ++t) {
    const std::uint64_t quota = std::min(need, *shared.in_band(t));
    need -= quota;
    *shared.quota(t) = quota;
    *shared.offset(t) = offset;
    offset += *shared.above(t) + quota;
  }
}

// Keeps, in place and in order, the candidates that win: keys above the band
// and the first `need` keys in it. Returns how many.
std::size_t filter_candidates(const PassShared& shared, const Selection& sel, std::size_t count) {
  std::uint32_t* cand_index = shared.scratch.cand_index.data();
  float* cand_value = shared.scratch.cand_value.data();
  std::size_t kept = 0;
  std::uint64_t need = sel.need;
  // Branch-free: whether a candidate wins is close to a coin toss.
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint32_t key = key_of(cand_value[j]);
    const bool tied = key >= sel.band.lo && key <= sel.band.hi;
    const bool win = key > sel.band.hi || (tied && need > 0);
    cand_index[kept] = cand_index[j];
    cand_value[kept] = cand_value[j];
    kept += win;
    need -= tied && win;
  }
  return kept;
}

// The candidates (all in the band, in index order) are refined in scratch
// until exact, filtered to the winners and merged into the payload behind the
// `definite` entries the collect pass wrote.
void finish_candidates(const PassShared& shared, Selection sel, std::size_t definite,
                       std::size_t count) {
  while (!sel.exact()) {
    const int level = sel.level + 1;
    pass_level(shared.tuning.isa, shared.scratch.cand_value.data(), 0, count, sel.band, level,
               false, shared.hist(0));
    *shared.above(0) = 0;  // descend() keeps per-thread counts; unused here.
    descend(shared, sel, level, 1);
  }
  const std::size_t kept = filter_candidates(shared, sel, count);
  // Encode the winners in index order, the encoded bits replacing each value
  // in place (moved as bits, never computed with, so any pattern survives).
  // Their residual writes land all over the input: prefetch well ahead.
  std::uint32_t* cand_index = shared.scratch.cand_index.data();
  float* cand_value = shared.scratch.cand_value.data();
  constexpr std::size_t kAhead = 48;
  for (std::size_t j = 0; j < kept; ++j) {
    if (j + kAhead < kept) shared.out.prefetch_residual(cand_index[j + kAhead]);
    cand_value[j] = bits_float(shared.out.encode(cand_index[j], cand_value[j]));
  }
  shared.out.merge(definite, cand_index, cand_value, kept);
}

// A floor for pass 1's histogram, from the keys of a small sample of acc:
// keys below it are not counted, which spares most of the histogram work at
// small ratios. The floor sits where the sample has about twice the expected
// number of keys above it plus a wide margin, so that fewer than k keys lie at
// or above it only with negligible probability; even then the result is the
// same (one more pass counts the keys below). 0: count everything.
std::uint32_t pass1_floor(const PassShared& shared) {
  if (shared.tuning.pass1_floor_bin >= 0) {
    const int bin = std::min(shared.tuning.pass1_floor_bin, static_cast<int>(kMaxBins) - 1);
    return static_cast<std::uint32_t>(bin) << kFirstShift;
  }
  const std::size_t samples = std::min<std::size_t>(4096, shared.n / 256);
  const double expected = static_cast<double>(shared.k) / static_cast<double>(shared.n) * samples;
  const auto rank = static_cast<std::size_t>(2 * expected + 8 * std::sqrt(expected) + 16);
  if (samples < 256 || rank >= samples / 2) return 0;
  std::vector<std::uint32_t>& keys = shared.scratch.sample;
  keys.resize(samples);
  const std::size_t stride = shared.n / samples;
  for (std::size_t j = 0; j < samples; ++j) {
    // Jittered within each stride, so periodic data cannot fool the sample.
    const std::size_t i = j * stride + (j * 0x9e3779b1u >> 7) % stride;
    const float acc =
        shared.residual ? add_nan_first(shared.in[i], shared.residual[i]) : shared.in[i];
    keys[j] = key_of(acc);
  }
  std::nth_element(keys.begin(), keys.begin() + rank, keys.end(), std::greater<>());
  return keys[rank] >> kFirstShift << kFirstShift;
}

void prepare_scratch(TopkScratch& scratch, unsigned threads) {
  const std::size_t hist_words = static_cast<std::size_t>(threads) * kHistStride;
  if (scratch.hist.size() < hist_words) scratch.hist.resize(hist_words);
  const std::size_t count_words = kMaxBins + 4 * static_cast<std::size_t>(threads);
  if (scratch.counts.size() < count_words) scratch.counts.resize(count_words);
}

// Pass 1, then the level-0 threshold bucket.
Selection first_level(PassShared& shared) {
  const std::uint32_t floor = pass1_floor(shared);
  run_threads(shared.threads, [&shared, floor](unsigned t) {
    pass_accumulate(shared, shared.begin(t), shared.begin(t + 1), floor, shared.hist(t));
    *shared.above(t) = 0;
  });
  std::uint64_t counted = 0;
  for (unsigned t = 0; t < shared.threads; ++t) {
    for (std::uint32_t b = floor >> kFirstShift; b < kLevels[0].bins; ++b) {
      counted += shared.hist(t)[b];
    }
  }
  if (counted < shared.k) {  // The floor was too high: count the keys below it too.
    run_threads(shared.threads, [&shared, floor](unsigned t) {
      pass_level(shared.tuning.isa, shared.src, shared.begin(t), shared.begin(t + 1),
                 Band{0, floor - 1}, 0, true, shared.hist(t));
    });
  }
  Selection sel;
  sel.need = shared.k;
  sel.in_band = shared.n;
  descend(shared, sel, 0, shared.threads);
  return sel;
}

void select_and_write(PassShared& shared) {
  const unsigned threads = shared.threads;
  Selection sel = first_level(shared);
  // Copying out a bucket costs 8 bytes per entry; above this, one more
  // histogram pass over the input is cheaper in time and memory.
  const std::uint64_t cap = std::max<std::uint64_t>(shared.n / 8, 1u << 16);
  while (!sel.exact() && sel.in_band > cap) {
    const int level = sel.level + 1;
    run_threads(threads, [&shared, &sel, level](unsigned t) {
      pass_level(shared.tuning.isa, shared.src, shared.begin(t), shared.begin(t + 1), sel.band,
                 level, false, shared.hist(t));
    });
    descend(shared, sel, level, threads);
  }
  if (sel.exact()) {
    plan_compact(shared, sel.need);
    run_threads(threads, [&shared, &sel](unsigned t) {
      pass_compact(shared, shared.begin(t), shared.begin(t + 1), sel.band, *shared.quota(t),
                   *shared.offset(t));
    });
    return;
  }
  plan_compact(shared, 0);  // Offsets of the entries above the band only.
  if (shared.scratch.cand_index.size() < sel.in_band) {
    shared.scratch.cand_index.resize(sel.in_band);
    shared.scratch.cand_value.resize(sel.in_band);
  }
  std::uint64_t cand = 0;
  for (unsigned t = 0; t < threads; ++t) {
    *shared.quota(t) = cand;  // Reused: where thread t's candidates start.
    cand += *shared.in_band(t);
  }
  run_threads(threads, [&shared, &sel](unsigned t) {
    pass_collect(shared, shared.begin(t), shared.begin(t + 1), sel.band, *shared.offset(t),
                 *shared.quota(t));
  });
  finish_candidates(shared, sel, shared.k - sel.need, sel.in_band);  // k - need are above the band.
}

// dense[index] += value over one payload, in payload order. The indices rise
// but far apart: prefetch the targets well ahead of the adds.
template <class V>
void scatter_add(const std::uint8_t* index, std::size_t k, float* dense) {
  const std::uint8_t* value = index + k * sizeof(std::uint32_t);
  constexpr std::size_t kAhead = 32;
  for (std::size_t j = 0; j < k; ++j) {
    std::uint32_t i;
    if (j + kAhead < k) {
      std::memcpy(&i, index + (j + kAhead) * sizeof i, sizeof i);
      __builtin_prefetch(dense + i, 1);
    }
    std::memcpy(&i, index + j * sizeof i, sizeof i);
    V v;
    std::memcpy(&v, value + j * sizeof v, sizeof v);
    // The shared NaN rule, so that the GPU twin gives the same bits.
    if constexpr (sizeof(V) == 2) {
      dense[i] = add_nan_first(dense[i], fp16_bits_to_float(v));
    } else {
      dense[i] = add_nan_first(dense[i], v);
    }
  }
}

}  // namespace

std::size_t topk_count(std::size_t n, double ratio) {
  if (n == 0) return 0;
  // ratio x n in double can land a hair above a whole number (0.07 x 100 is
  // 7.000000000000001): a relative 1e-12 below it keeps ceil() on the number
  // the user meant, and every rank computes the same k from the same n.
  const double x = ratio * static_cast<double>(n);
  if (!(x > 1.0)) return 1;  // Also NaN and negative ratios.
  if (x >= static_cast<double>(n)) return n;
  return std::min(n, static_cast<std::size_t>(std::ceil(x - x * 1e-12)));
}

std::size_t topk_payload_bytes(std::size_t k, TopkValues values) {
  return k * (sizeof(std::uint32_t) + (values == TopkValues::fp16 ? 2 : 4));
}

void topk_compress(const float* in, float* residual, std::size_t n, std::size_t k,
                   TopkValues values, void* payload, TopkScratch& scratch) {
  topk_compress(in, residual, n, k, values, payload, scratch, TopkTuning{});
}

void topk_compress(const float* in, float* residual, std::size_t n, std::size_t k,
                   TopkValues values, void* payload, TopkScratch& scratch,
                   const TopkTuning& tuning) {
  if (n == 0 || k == 0) return;
  // Indices are uint32, and so are the histogram counters of one thread.
  if (n > UINT32_MAX) throw std::invalid_argument("topk_compress: n exceeds uint32 indices");
  if (k > n) throw std::invalid_argument("topk_compress: k > n");
  const unsigned threads = pick_threads(n, tuning.threads);
  prepare_scratch(scratch, threads);
  const float* src = residual ? residual : in;
  PassShared shared{in,     residual, src,     n,
                    k,      tuning,   threads, PayloadWriter(payload, k, values, residual),
                    scratch};
  select_and_write(shared);
}

bool topk_payload_valid(const void* payload, std::size_t k, std::size_t n) {
  if (k > n) return false;
  const auto* index = static_cast<const std::uint8_t*>(payload);
  std::uint64_t next = 0;  // the least index the next entry may hold
  for (std::size_t j = 0; j < k; ++j) {
    std::uint32_t i;
    std::memcpy(&i, index + j * sizeof i, sizeof i);
    if (i < next || i >= n) return false;
    next = std::uint64_t{i} + 1;
  }
  return true;
}

void topk_accumulate(const void* payload, std::size_t k, TopkValues values, float* dense) {
  const auto* index = static_cast<const std::uint8_t*>(payload);
  if (values == TopkValues::fp16) {
    scatter_add<std::uint16_t>(index, k, dense);
  } else {
    scatter_add<float>(index, k, dense);
  }
}

void topk_accumulate_gathered(const void* gathered, std::size_t stride, int ranks, std::size_t k,
                              TopkValues values, std::size_t n, float* dense) {
  const auto* bytes = static_cast<const std::byte*>(gathered);
  bool valid = true;
  for (int r = 0; r < ranks; ++r) valid = valid && topk_payload_valid(bytes + r * stride, k, n);
  std::fill_n(dense, n, valid ? 0.0f : bits_float(0x7fc00000u));
  if (!valid) return;
  for (int r = 0; r < ranks; ++r) topk_accumulate(bytes + r * stride, k, values, dense);
}

void topk_split_parts(const void* payload, std::size_t k, TopkValues values, std::size_t n,
                      int ranks, void* out, std::uint64_t* part_bytes) {
  const std::size_t value_bytes = values == TopkValues::fp16 ? 2 : 4;
  const auto* index = static_cast<const std::uint32_t*>(payload);
  const auto* value = static_cast<const std::uint8_t*>(payload) + k * sizeof(std::uint32_t);
  auto* at = static_cast<std::uint8_t*>(out);
  std::size_t first = 0;  // the payload's first entry in shard s (indices ascend)
  for (int s = 0; s < ranks; ++s) {
    const std::size_t begin = topk_shard_begin(n, ranks, s);
    const std::size_t end =
        std::lower_bound(index + first, index + k, topk_shard_begin(n, ranks, s + 1)) - index;
    const std::size_t m = end - first;
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t shifted = index[first + i] - static_cast<std::uint32_t>(begin);
      std::memcpy(at + i * sizeof(std::uint32_t), &shifted, sizeof shifted);
    }
    std::memcpy(at + m * sizeof(std::uint32_t), value + first * value_bytes, m * value_bytes);
    const std::size_t bytes = topk_payload_bytes(m, values);
    part_bytes[s] = (bytes + 3) / 4 * 4;
    std::memset(at + bytes, 0, part_bytes[s] - bytes);
    at += part_bytes[s];
    first = end;
  }
}

}  // namespace slimreduce::kernels
