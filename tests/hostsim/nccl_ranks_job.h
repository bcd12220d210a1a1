// The job of nccl_ranks_app (several ranks under mpirun on the host
// simulation), shared by its files: communicators and calls as the job and
// the reference model see them, the checks' bookkeeping, and the checks.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/nccl_compat.h"
#include "interpose/slimreduce.h"
#include "tests/hostsim/reference_model.h"
#include "tests/hostsim/sim.h"

#define CHECK(ok, what)                                         \
  do {                                                          \
    if (!(ok)) {                                                \
      std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, what); \
      MPI_Abort(MPI_COMM_WORLD, 1);                             \
    }                                                           \
  } while (0)
#define CUDA_OK(x) CHECK((x) == cudaSuccess, #x)
#define NCCL_OK(x) CHECK((x) == ncclSuccess, #x)

namespace ranks_job {

namespace sim = slimreduce::hostsim;

extern const sim::Mode mode;
extern sim::Model model;
extern int failures;
extern int checks;
extern int world_rank;
extern unsigned next_call;  // seeds the inputs: every rank counts every call alike
extern int next_comm_id;    // the model's names for communicators

// A communicator as the job and the model see it.
struct Comm {
  ncclComm_t nccl = nullptr;
  int rank = 0;
  int size = 1;
  int id = 0;  // the model's name for it: a new one for each made
  // The same ranks in the same order in MPI, where the job has it (the world):
  // prepare gathers every rank's input through it; elsewhere each rank makes them all.
  MPI_Comm mpi = MPI_COMM_NULL;
};

// One call: where it goes, and every rank's input (in the communicator's rank order).
struct Call {
  Comm* comm;
  float* send;
  float* recv;
  cudaStream_t stream;
  sim::ModelCall model;
};

// Writes this rank's input for the call into send (as the call's type).
Call prepare(Comm& comm, float* send, float* recv, std::size_t n, ncclDataType_t type,
             ncclRedOp_t op, cudaStream_t stream);
void issue(const Call& c);
// What came back (widened from a 16-bit type) in fp32.
std::vector<float> read_back(const Call& c);
// One check: counted, and printed by rank 0, or by any rank where it failed.
void expect(bool ok, const std::string& what);
// The call's result, bit for bit against the model's.
void verify(const char* what, const Call& c);
slimreduce_counters counters_now();
// Polls a non-blocking communicator until its work is taken, as NCCL asks.
void wait_ready(ncclComm_t comm);
// A call that may answer ncclInProgress (a non-blocking communicator's).
void may_progress(ncclResult_t rc, const char* what);
Comm make_world_comm(bool blocking = true);
// A communicator split from `parent` (ncclCommSplit, keyed by rank): a new one
// for the model, each color's its own.
Comm split_comm(const Comm& parent, int color);
// The job's stream: one of its own, non-blocking; or, with
// HOSTSIM_APP_STREAM=legacy, the legacy default stream, as a framework that
// works on stream 0 (its work then joins every blocking stream's, and it
// cannot be captured: the jobs leave their capture checks out).
cudaStream_t make_job_stream();
bool on_legacy_stream();
// MPI started with every thread allowed (the streams' threads, unless
// HOSTSIM_ASYNC=0, and a job's own), and world_rank set.
void start_job(int* argc, char*** argv);
// Every workspace and residual went with its communicator: no device bytes left.
void expect_no_device_bytes_left();
// A job of one communicator ends: it is destroyed, its buffers and stream
// freed, no device bytes left (checked), then finish_job().
int end_job(Comm& world, float* send, float* recv, cudaStream_t stream);
// Calls taken as eligible so far: compressed, or held back only by warm-up or the residual cap.
std::uint64_t eligible_count();
// The job's end on every rank: the failures summed over ranks, rank 0's
// verdict line, MPI_Finalize. The process's exit code: 0 when none failed.
int finish_job();
// One fp32 sum on comm, verified, and taken as eligible unless the compressor is none.
void reduce_on(Comm& comm, const std::string& what, float* send, float* recv, std::size_t n,
               cudaStream_t stream);

// The checks beyond the buckets (nccl_ranks_checks.cc).
void check_simulated_group(Comm& world, float* send, float* recv, cudaStream_t stream);
void check_opposite_orders(Comm& world, float* const send[2], float* const recv[2], std::size_t n,
                           cudaStream_t stream);
void check_switch_in_group(Comm& world, float* send, float* recv, std::size_t n,
                           cudaStream_t stream);
void check_switch(Comm& world, float* const send[3], float* const recv[3],
                  const std::size_t sizes[3], cudaStream_t stream);
void check_non_blocking(Comm& world, float* const send[3], float* const recv[3],
                        const std::size_t sizes[3], cudaStream_t stream);
void check_other_makers(const Comm& world, float* send, float* recv, std::size_t n,
                        cudaStream_t stream);
void check_not_finite(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream);
void check_fp16_overflow(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream);
void check_corrupt_payload(Comm& world, float* send, float* recv, std::size_t n,
                           cudaStream_t stream);
void check_int8_bytes(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream);
void check_topk_sharded_bytes(Comm& world, float* send, std::size_t n, cudaStream_t stream);
void check_coll_config(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream);

}  // namespace ranks_job
