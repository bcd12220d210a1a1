// How far a GPU result is from its CPU twin where the bits may differ
// (PowerSGD's products through cuBLAS): shared by tests/cuda/nccl_app.cu
// and tests/cuda/mpi_device_app.cu.
#pragma once

#include <cmath>
#include <cstddef>

namespace test_compare {

// ||got - want|| / ||want|| over the finite elements (||got - want|| where
// want is all zeros); infinity where got and want are not finite in the same places.
inline double relative_difference(const float* got, const float* want, std::size_t n) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(got[i]) != std::isfinite(want[i])) return INFINITY;
    if (!std::isfinite(want[i])) continue;
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

}  // namespace test_compare
