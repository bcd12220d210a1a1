// The MPI device-buffer path of a CPU-only build (core/CMakeLists.txt compiles
// this file instead of device_staging.cc and device_pointer.cc): no pointer
// is a device pointer, so the engine never reaches the rest, and the pool
// never holds a space.
#include "core/mpi/device_staging.h"

namespace slimreduce::device_staging {

struct StagingSpace {
  int device = -1;
};

StagingPool::StagingPool(DeviceAllocator* residual_memory) : residual_memory_(residual_memory) {}
StagingPool::~StagingPool() = default;
std::unique_ptr<StagingSpace> StagingPool::take(int) { return nullptr; }
void StagingPool::give_back(std::unique_ptr<StagingSpace>) {}

bool is_device_pointer(const void*) { return false; }

bool keeps_residual_on_device(const AllreduceCall&, compressors::Compressor&, int) { return false; }

Status allreduce(const AllreduceCall&, compressors::Compressor&, CommState&, backends::Transport&,
                 ResidualSlot*, StagingPool&, Reduced*, const RunOptions&) {
  return Status::internal();  // unreachable: no pointer is a device pointer here
}

Status reduced_norm(const float*, std::size_t, StagingPool&, double*) {
  return Status::internal();  // unreachable, as allreduce
}

int passed_through_allreduce(const AllreduceCall&, MPI_Datatype, MPI_Op, MPI_Comm, StagingPool&,
                             int*) {
  return MPI_ERR_INTERN;  // unreachable, as allreduce
}

}  // namespace slimreduce::device_staging
