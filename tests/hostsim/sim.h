// The host simulation's own interface (tests only): what the simulated CUDA
// runtime (cuda_runtime_sim.cc) offers the simulated kernels and the simulated
// NCCL. Streams run their work on the host, in order, each on a thread of its
// own (at once with HOSTSIM_ASYNC=0), the legacy default stream joined to the
// blocking streams as on a GPU; while a stream is being captured its work is
// recorded instead and runs at each graph launch. Device memory faults when
// host code touches it, as on a GPU; the simulated device reaches it through
// device_view, and a kernel can insist that every pointer it is given is
// device memory (on_device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace slimreduce::hostsim {

// Runs `work` on `stream` (now, or at each launch of the graph being captured).
void enqueue(cudaStream_t stream, std::function<void()> work);

// A simulated kernel: `work` on `stream` as enqueue() puts it, after
// HOSTSIM_KERNEL_US microseconds of emulated compute (default 0), so that a
// rank launched with it has a slower GPU than the others (the test of auto's
// choice from every rank's own clock).
void launch_kernel(cudaStream_t stream, std::function<void()> work);

// Runs `work` once every one of `streams` has reached this point, and holds
// each stream's later work until it has run: one launch on several streams,
// as NCCL launches a group whose calls name several streams ("a global
// synchronization point between the streams"). Under capture, at once
// (HOSTSIM_ASYNC=0), or with the legacy stream among them, it is put on the
// first stream alone.
void enqueue_joined(const std::vector<cudaStream_t>& streams, std::function<void()> work);

// How many pieces of work have been put on `stream` so far (run or recorded):
// a test can check that nothing was enqueued between two points.
std::size_t work_enqueued(cudaStream_t stream);

// How many times a stream was made to wait for an event so far
// (cudaStreamWaitEvent): a test can tell that a call ran over two streams.
std::size_t stream_waits();

// How many calls so far would have made the host wait for the device on a GPU
// (synchronizes, synchronous copies and sets, frees, pinned allocations).
std::size_t host_syncs();

// Whether [ptr, ptr + bytes) lies inside one live device allocation. A kernel
// given anything else would fault on a GPU: the simulated kernels abort then.
bool is_device_range(const void* ptr, std::size_t bytes);

// Where the simulated device (kernels, copies, collectives) reaches the bytes
// at ptr. The address of device memory (not managed) is a range with no
// access, so host code that reads or writes it faults as on a GPU; its bytes
// live in a second mapping, which this names. Pageable, pinned and managed
// memory is reached where it is.
void* device_view(const void* ptr);
template <class T>
T* device_view(T* ptr) {
  return static_cast<T*>(device_view(static_cast<const void*>(ptr)));
}

// Whether ptr lies in memory from cudaMallocManaged (device memory too).
bool is_managed(const void* ptr);

// Bytes of device memory allocated and not yet freed (a leak check for tests).
std::size_t device_bytes_live();
// The same once every free under way has been made: after ncclCommAbort the
// library frees a communicator's memory on a thread of its own (its wait for
// the device must not hold up the aborting thread), so a leak check after an
// abort waits for that, up to 30 s, before it counts.
std::size_t device_bytes_live_settled();

// Aborts with `what` unless [ptr, ptr + bytes) is device memory (bytes 0: no check).
void require_device(const char* what, const void* ptr, std::size_t bytes);
// The same check; then where a kernel reaches those bytes (device_view), in
// one lookup.
void* on_device(const char* what, const void* ptr, std::size_t bytes);
template <class T>
T* on_device(const char* what, T* ptr, std::size_t bytes) {
  return static_cast<T*>(on_device(what, static_cast<const void*>(ptr), bytes));
}

// The simulated NCCL (nccl_sim.cc, nccl_sim_comms.cc): how many ncclAllReduceConfig calls have
// reached it with a config (not null), so a test can tell that a call came
// through with its config.
std::size_t nccl_configs_received();
// How many ncclAllReduce (and ncclAllReduceConfig) calls have reached it: a
// test can tell a call passed through whole from one cut into pieces.
std::size_t nccl_all_reduces_received();

// The next ncclAllGather submitted on this process: the 4 bytes at `offset`
// of rank 1's block come out as `bytes` (every rank that asks writes the same
// into its own copy, as if rank 1 had sent them): a corrupt payload, for the
// device-side checks of what other ranks send.
void corrupt_next_allgather(std::size_t offset, std::uint32_t bytes);
// Whether that corruption still waits for an allgather; disarms it.
bool take_unused_corruption();

// How many of the simulated NCCL's collectives wait for other ranks now (a
// test can abort their communicator while one does).
std::size_t nccl_collectives_waiting();

// The simulated NCCL's communicators alive now (made and not yet destroyed or
// aborted), SlimReduce's own sub-communicators included: a test can tell that
// they went with their parent.
std::size_t nccl_comms_alive();
// How many destroys or aborts found communicators split from the one ended
// still alive (SlimReduce must end its sub-communicators first).
std::size_t nccl_comms_ended_before_their_splits();

}  // namespace slimreduce::hostsim
