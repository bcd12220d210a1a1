// fp32 <-> 16-bit float casts on the CPU: the reference twin of kernels/cuda/.
// Every entry point has a scalar path and SIMD paths chosen at run time; all
// paths give the same bits (tests compare them over every 16-bit pattern).
#pragma once

#include <cstddef>
#include <cstdint>

namespace slimreduce::kernels {

enum class HalfFormat { fp16, bf16 };

// The instruction set a kernel runs with. Tests pin it to compare paths.
enum class Isa { scalar, avx2, avx512 };

// The best ISA this CPU supports (checked once, at run time).
Isa best_isa();

// A kernel's entry point for `isa`: a request for an ISA this CPU lacks runs
// the best one it has instead (the same bits: every path is held to scalar).
template <class Fn>
Fn pick_isa(Isa isa, Fn scalar, Fn avx2, Fn avx512) {
  const Isa best = best_isa();
  const Isa usable = static_cast<int>(isa) > static_cast<int>(best) ? best : isa;
  return usable == Isa::avx512 ? avx512 : usable == Isa::avx2 ? avx2 : scalar;
}
// For kernels whose widest path is AVX2.
template <class Fn>
Fn pick_isa(Isa isa, Fn scalar, Fn avx2) {
  return pick_isa(isa, scalar, avx2, avx2);
}
const char* isa_name(Isa isa);

// out[i] = round16(in[i] + residual[i]), round to nearest even.
// With residual != nullptr (error feedback): residual[i] = acc - widen(out[i])
// where acc = in[i] + residual[i] in fp32; residual[i] = 0 where widen(out[i])
// is not finite (an inf or NaN cannot be carried forward).
// With residual == nullptr: out[i] = round16(in[i]).
void compress(HalfFormat format, const float* in, float* residual, std::uint16_t* out,
              std::size_t n, Isa isa = best_isa());

// out[i] = widen(in[i]); exact.
void decompress(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n,
                Isa isa = best_isa());

// inout[i] = round16(widen(in[i]) + widen(inout[i])): one ring step, the sum
// formed in fp32 and rounded once for the wire.
void accumulate(HalfFormat format, const std::uint16_t* in, std::uint16_t* inout, std::size_t n,
                Isa isa = best_isa());

// Whether none of the n 16-bit values is an inf or a NaN (all exponent bits
// set): a reduced fp16 wire whose fp32 sum left its range shows as inf.
bool all_finite(HalfFormat format, const std::uint16_t* in, std::size_t n);

// Whether some acc = in[i] + residual[i] (in[i] without a residual) is finite
// and beyond fp16's range (beyond_fp16): where a 16-bit result must be bf16.
bool any_beyond_fp16(const float* in, const float* residual, std::size_t n);

}  // namespace slimreduce::kernels
