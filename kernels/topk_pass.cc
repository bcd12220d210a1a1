// The passes over the input, each on one thread's index range. The SIMD scans
// (topk_scan.cc) turn a chunk into bins or bit masks; the loops here walk the
// set bits, so per-entry work is paid only for the entries that matter.
#include <algorithm>
#include <bit>

#include "kernels/topk_job.h"

namespace slimreduce::kernels::topk_detail {
namespace {

void count_bins(const std::uint32_t* bins, std::size_t m, std::uint32_t* h) {
  std::size_t j = 0;
  for (; j + 4 <= m; j += 4) {
    ++h[bins[j]];
    ++h[kMaxBins + bins[j + 1]];
    ++h[2 * kMaxBins + bins[j + 2]];
    ++h[3 * kMaxBins + bins[j + 3]];
  }
  for (; j < m; ++j) ++h[bins[j]];
}

// Sums the sub-histograms into the first one.
void fold_subs(std::uint32_t* h, std::uint32_t bins) {
  for (std::size_t s = 1; s < kSubs; ++s) {
    for (std::uint32_t b = 0; b < bins; ++b) h[b] += h[s * kMaxBins + b];
  }
}

// Counts (key >> shift) & mask of data[j] for each set bit j of the masks
// (bit j % 64 of word j / 64), spread over the sub-histograms.
void count_hits(const float* data, const std::uint64_t* words, std::size_t m, int shift,
                std::uint32_t mask, std::uint32_t* h) {
  std::size_t sub = 0;
  for (std::size_t w = 0; w * 64 < m; ++w) {
    for (std::uint64_t bits = words[w]; bits; bits &= bits - 1) {
      const std::uint32_t key = key_of(data[w * 64 + std::countr_zero(bits)]);
      ++h[sub * kMaxBins + ((key >> shift) & mask)];
      sub = (sub + 1) % kSubs;
    }
  }
}

}  // namespace

void pass_accumulate(const PassShared& shared, std::size_t b, std::size_t e, std::uint32_t floor,
                     std::uint32_t* h) {
  std::fill(h, h + kHistStride, 0u);
  std::uint32_t bins[kChunk];
  std::uint64_t hits[kMaskWords];
  for (std::size_t pos = b; pos < e; pos += kChunk) {
    const std::size_t m = std::min(kChunk, e - pos);
    float* res = shared.residual ? shared.residual + pos : nullptr;
    if (floor == 0) {  // Every key counts: bins straight from SIMD, no bit walk.
      acc_bins(shared.tuning.isa, shared.in + pos, res, m, bins);
      count_bins(bins, m, h);
    } else {
      acc_masks(shared.tuning.isa, shared.in + pos, res, m, floor, hits);
      count_hits(shared.src + pos, hits, m, kFirstShift, kMaxBins - 1, h);
    }
  }
  fold_subs(h, kLevels[0].bins);
}

void pass_level(Isa isa, const float* data, std::size_t b, std::size_t e, Band band, int level,
                bool keep, std::uint32_t* h) {
  const Level lv = kLevels[level];
  std::fill(h + (keep ? kMaxBins : 0), h + kHistStride, 0u);
  std::uint64_t above[kMaskWords], in[kMaskWords];
  for (std::size_t pos = b; pos < e; pos += kChunk) {
    const std::size_t m = std::min(kChunk, e - pos);
    band_masks(isa, data + pos, m, band, above, in);
    count_hits(data + pos, in, m, lv.shift, lv.bins - 1, h);
  }
  fold_subs(h, lv.bins);
}

void pass_compact(const PassShared& shared, std::size_t b, std::size_t e, Band band,
                  std::uint64_t quota, std::uint64_t pos) {
  std::uint64_t above[kMaskWords], in[kMaskWords];
  for (std::size_t base = b; base < e; base += kChunk) {
    const std::size_t m = std::min(kChunk, e - base);
    band_masks(shared.tuning.isa, shared.src + base, m, band, above, in);
    for (std::size_t w = 0; w * 64 < m; ++w) {
      const std::uint64_t tied = quota ? in[w] : 0;
      for (std::uint64_t bits = above[w] | tied; bits; bits &= bits - 1) {
        if (tied & bits & (~bits + 1)) {  // The lowest set bit is a tied key.
          if (quota == 0) continue;
          --quota;
        }
        const std::size_t i = base + w * 64 + std::countr_zero(bits);
        shared.out.put(pos++, static_cast<std::uint32_t>(i), shared.src[i]);
      }
    }
  }
}

void pass_collect(const PassShared& shared, std::size_t b, std::size_t e, Band band,
                  std::uint64_t pos, std::uint64_t cand) {
  std::uint32_t* cand_index = shared.scratch.cand_index.data();
  float* cand_value = shared.scratch.cand_value.data();
  std::uint64_t above[kMaskWords], in[kMaskWords];
  for (std::size_t base = b; base < e; base += kChunk) {
    const std::size_t m = std::min(kChunk, e - base);
    band_masks(shared.tuning.isa, shared.src + base, m, band, above, in);
    for (std::size_t w = 0; w * 64 < m; ++w) {
      for (std::uint64_t bits = above[w]; bits; bits &= bits - 1) {
        const std::size_t i = base + w * 64 + std::countr_zero(bits);
        shared.out.put(pos++, static_cast<std::uint32_t>(i), shared.src[i]);
      }
      for (std::uint64_t bits = in[w]; bits; bits &= bits - 1) {
        const std::size_t i = base + w * 64 + std::countr_zero(bits);
        cand_index[cand] = static_cast<std::uint32_t>(i);
        cand_value[cand++] = shared.src[i];
      }
    }
  }
}

}  // namespace slimreduce::kernels::topk_detail
