// One rank's side of a series of compressed calls on one key through
// core's host_allreduce over the real MPI (linked, no preload): its
// compressor, residual, owner-side state and communicator. Shared by the
// multi-rank tests of the sharded algorithm and of stochastic rounding.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/mpi_transport.h"
#include "compressors/registry.h"
#include "core/mpi/comm_state.h"
#include "core/mpi/host_allreduce.h"

namespace slimreduce::testing {

// One rank's side of a series of calls on one key.
class Caller {
 public:
  Caller(const std::string& name, compressors::CompressorOptions options, std::size_t count,
         bool error_feedback)
      : count_(count), residual_(error_feedback ? count : 0, 0.0f) {
    compressor_ = compressors::make_compressor(name, options);
    EXPECT_EQ(state_.private_comm(&wire_), MPI_SUCCESS);
  }
  // `draw`: the call's, for a stochastic quantizer (CallDraw's call and rank).
  std::vector<float> call(const std::vector<float>& input, RunOptions options = {},
                          compressors::CallDraw draw = {}) {
    backends::MpiTransport transport(wire_, state_.rank(), state_.size());
    std::vector<float> output(count_, -7.0f);
    const Status status =
        host_allreduce({input.data(), output.data(), count_,
                        residual_.empty() ? nullptr : residual_.data(), &state_vector_, 0, draw},
                       *compressor_, transport, state_, options, &reduced_);
    EXPECT_TRUE(status.ok());
    return output;
  }
  const std::vector<float>& residual() const { return residual_; }
  const std::vector<float>& owner_residual() const { return state_vector_; }
  const Reduced& reduced() const { return reduced_; }
  int rank() const { return state_.rank(); }
  int size() const { return state_.size(); }

 private:
  std::size_t count_;
  CommState state_{1, MPI_COMM_WORLD};
  MPI_Comm wire_ = MPI_COMM_NULL;
  std::unique_ptr<compressors::Compressor> compressor_;
  std::vector<float> residual_;
  std::vector<float> state_vector_;
  Reduced reduced_;
};

}  // namespace slimreduce::testing
