#include "core/nccl/hierarchy.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "algorithms/hierarchical.h"
#include "backends/nccl_backend.h"
#include "compressors/kind.h"
#include "core/gpu/cuda_support.h"
#include "core/nccl/plan.h"

namespace slimreduce {
namespace {

namespace real = backends::nccl;
using algorithms::Hierarchical;

// ---- The nodes, learnt once ----

// A node's name as every rank of it spells it; equal names, one node.
constexpr std::size_t kNameBytes = 128;
using NodeName = std::array<char, kNameBytes>;

// Emulated nodes: the number of this rank's block of the job. Otherwise the
// machine: its host name and boot id (two containers on one host share the
// boot id; two machines seldom share both).
NodeName node_name(int job_rank, std::optional<int> local_size) {
  NodeName name{};
  if (local_size) {
    std::snprintf(name.data(), name.size(), "emulated node %d", job_rank / *local_size);
    return name;
  }
  char host[64] = {};
  gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  std::snprintf(name.data(), name.size(), "%s %s", host, boot.c_str());
  return name;
}

// A stream of our own, and device memory ordered on it (no device-wide wait,
// as cudaMalloc and cudaFree may make), gone with the scope.
struct PrivateStream {
  cudaStream_t stream = nullptr;
  ~PrivateStream() {
    if (stream) cudaStreamDestroy(stream);
  }
};
struct PrivateBuffer {
  DeviceAllocator& allocator;
  cudaStream_t stream;
  void* ptr = nullptr;
  ~PrivateBuffer() {
    if (ptr) allocator.release(ptr, stream);
  }
};

// Every rank's node name, by an allgather over comm on a stream of our own,
// waited for: the caller's stream is never waited for (NCCL orders this after
// the communicator's earlier work, wherever that was enqueued).
ncclResult_t exchange(ncclComm_t comm, int size, int device, DeviceAllocator& allocator,
                      const NodeName& mine, std::vector<NodeName>* all) {
  DeviceGuard guard(device);
  if (!guard.ok()) return ncclUnhandledCudaError;
  PrivateStream stream;
  cudaError_t rc = cudaStreamCreateWithFlags(&stream.stream, cudaStreamNonBlocking);
  if (rc != cudaSuccess) return backends::nccl_code(Status::cuda(rc));
  const std::size_t bytes = kNameBytes * (size + 1);  // every rank's names, then this rank's
  PrivateBuffer buffer{allocator, stream.stream, allocator.allocate(bytes, stream.stream, false)};
  if (!buffer.ptr) return ncclSystemError;
  auto* names = static_cast<std::byte*>(buffer.ptr);
  std::byte* own = names + kNameBytes * size;
  rc = cudaMemcpyAsync(own, mine.data(), kNameBytes, cudaMemcpyHostToDevice, stream.stream);
  if (rc != cudaSuccess) return backends::nccl_code(Status::cuda(rc));
  const ncclResult_t gathered =
      real::call(real::api().all_gather, static_cast<const void*>(own), static_cast<void*>(names),
                 kNameBytes, ncclUint8, comm, stream.stream);
  if (gathered != ncclSuccess) return gathered;
  all->resize(size);
  rc =
      cudaMemcpyAsync(all->data(), names, kNameBytes * size, cudaMemcpyDeviceToHost, stream.stream);
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(stream.stream);
  return backends::nccl_code(Status::cuda(rc));
}

// A sub-transport ncclCommSplit made (NcclTransport::split makes no other kind).
std::unique_ptr<backends::NcclTransport> as_nccl(std::unique_ptr<backends::Transport> made) {
  return std::unique_ptr<backends::NcclTransport>(
      static_cast<backends::NcclTransport*>(made.release()));
}

// ---- One call ----

// Where a hierarchical call's region holds what, in bytes from its start.
struct Region {
  std::size_t shards = 0;  // algorithms::Hierarchical's workspace
  std::size_t wire = 0;    // cast: the shard's 16-bit wire
  std::size_t slot = 0;    // top-k: one payload's device slot
  std::size_t payload = 0, gathered = 0, select_scratch = 0, finish_scratch = 0;  // top-k
  std::size_t total = 0;
};

Region region_of(const CallPlan& p, const compressors::Compressor& compressor) {
  const int local = p.nodes->node->size();
  const int nodes = p.nodes->cross->size();
  const std::size_t shard = Hierarchical::shard_count(p.call.count, local);
  Region r;
  std::size_t at = round256(Hierarchical::workspace_bytes(p.call.count, local));
  if (p.call.verdict.path == ReductionPath::topk) {
    const auto& gathered = compressors::kind_cast<compressors::GatheredCompressor>(compressor);
    r.slot = gathered.device_slot_bytes(shard);
    r.payload = at;
    r.gathered = r.payload + round256(r.slot);
    r.select_scratch = r.gathered + round256(r.slot * nodes);
    r.finish_scratch = r.select_scratch + round256(gathered.device_compress_scratch_bytes(shard));
    at = r.finish_scratch + round256(gathered.device_finish_scratch_bytes(shard, nodes));
  } else {
    const auto& summable = compressors::kind_cast<compressors::SummableCompressor>(compressor);
    r.wire = at;
    at += round256(algorithms::CastRing::wire_bytes(summable, shard));
  }
  r.total = at;
  return r;
}

// The shard's local work on the call's stream: copies, and the compressor's kernels.
class DeviceShard : public Hierarchical::Shard {
 public:
  explicit DeviceShard(cudaStream_t stream) : stream_(stream) {}
  Status copy(const float* from, std::size_t n, float* to) override {
    if (n == 0) return {};
    return Status::cuda(
        cudaMemcpyAsync(to, from, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  Status zero(float* to, std::size_t n) override {
    if (n == 0) return {};
    return Status::cuda(cudaMemsetAsync(to, 0, n * sizeof(float), stream_));
  }

 protected:
  cudaStream_t stream_;
};

// A summable compressor's shard: cast kernel, NCCL's 16-bit sum across nodes, decode kernel.
class CastShard final : public DeviceShard {
 public:
  CastShard(backends::Transport& cross, compressors::SummableCompressor& compressor, std::size_t n,
            std::byte* wire, int divisor, cudaStream_t stream)
      : DeviceShard(stream),
        compressor_(compressor),
        n_(n),
        wire_(wire),
        divisor_(divisor),
        ring_(cross, compressor, n, wire, nullptr) {}
  Status compress(const float* input, float* residual) override {
    return Status::cuda(compressor_.device_compress(input, residual, n_, wire_, stream_));
  }
  Status communicate() override { return ring_.communicate(); }
  Status finish(float* output) override {
    return Status::cuda(compressor_.device_decompress(wire_, output, n_, divisor_, stream_));
  }
  double wire_sent() const override { return ring_.wire_sent(); }

 private:
  compressors::SummableCompressor& compressor_;
  std::size_t n_;
  std::byte* wire_;
  int divisor_;
  algorithms::CastRing ring_;
};

// A gathered compressor's shard: select kernel, allgather across nodes,
// accumulate kernel (the payloads in node order).
class TopkShard final : public DeviceShard {
 public:
  TopkShard(backends::Transport& cross, compressors::GatheredCompressor& compressor, std::size_t n,
            std::byte* base, const Region& r, int divisor, cudaStream_t stream)
      : DeviceShard(stream),
        compressor_(compressor),
        n_(n),
        ranks_(cross.size()),
        slot_(r.slot),
        payload_(base + r.payload),
        gathered_(base + r.gathered),
        select_scratch_(base + r.select_scratch),
        finish_scratch_(base + r.finish_scratch),
        divisor_(divisor),
        allgather_(cross, compressor, n, r.slot, payload_, gathered_) {}
  Status compress(const float* input, float* residual) override {
    return Status::cuda(compressor_.device_compress(compressors::Elem::fp32, input, residual, n_,
                                                    payload_, select_scratch_, stream_));
  }
  Status communicate() override { return allgather_.communicate(); }
  Status finish(float* output) override {
    return Status::cuda(compressor_.device_finish(gathered_, slot_, ranks_, n_,
                                                  compressors::Elem::fp32, output, divisor_,
                                                  finish_scratch_, stream_));
  }
  double wire_sent() const override { return allgather_.wire_sent(); }

 private:
  compressors::GatheredCompressor& compressor_;
  std::size_t n_;
  int ranks_;
  std::size_t slot_;
  std::byte* payload_;
  std::byte* gathered_;
  std::byte* select_scratch_;
  std::byte* finish_scratch_;
  int divisor_;
  algorithms::GatheredAllreduce allgather_;
};

class HierarchicalStep final : public scheduler::Step {
 public:
  HierarchicalStep(const CallPlan& p, compressors::Compressor& compressor)
      : call_(p.call),
        residual_(p.residual),
        device_(p.comm->device),
        nodes_(p.nodes),
        node_(view(*p.nodes->node, p.call.stream)),
        cross_(view(*p.nodes->cross, p.call.stream)),
        hierarchical_(node_, p.call.count, p.place.region, shard(p, compressor)) {}

  // Before the group's collectives: the padded copy, where the count needs one.
  Status compress() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    return hierarchical_.stage(static_cast<const float*>(call_.sendbuff));
  }
  // Among the group's collectives: the node's fp32 reduce-scatter.
  Status communicate() override { return hierarchical_.scatter(); }
  // After the group ended (the node's sum is on its way): the rest, in
  // stream order, its collectives each launched at once (outside any group).
  Status finish() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    SLIMREDUCE_TRY(hierarchical_.compress_shard(residual_));
    SLIMREDUCE_TRY(hierarchical_.communicate());
    SLIMREDUCE_TRY(hierarchical_.finish_shard());
    return hierarchical_.gather(static_cast<float*>(call_.recvbuff));
  }
  double wire_sent() const override { return hierarchical_.wire_sent(); }

 private:
  static backends::NcclTransport view(const backends::NcclTransport& sub, void* stream) {
    return backends::NcclTransport(sub.comm(), sub.rank(), sub.size(),
                                   static_cast<cudaStream_t>(stream));
  }
  std::unique_ptr<Hierarchical::Shard> shard(const CallPlan& p,
                                             compressors::Compressor& compressor) {
    const Region r = region_of(p, compressor);
    const std::size_t n = Hierarchical::shard_count(p.call.count, node_.size());
    const int divisor = p.call.verdict.average ? p.comm->size : 1;
    const auto stream = static_cast<cudaStream_t>(p.call.stream);
    if (p.call.verdict.path == ReductionPath::topk) {
      return std::make_unique<TopkShard>(
          cross_, compressors::kind_cast<compressors::GatheredCompressor>(compressor), n,
          p.place.region, r, divisor, stream);
    }
    return std::make_unique<CastShard>(
        cross_, compressors::kind_cast<compressors::SummableCompressor>(compressor), n,
        p.place.region + r.wire, divisor, stream);
  }

  Reduction call_;
  float* residual_;
  int device_;
  std::shared_ptr<NcclHierarchy> nodes_;  // its sub-communicators, alive while the step is
  backends::NcclTransport node_;
  backends::NcclTransport cross_;
  Hierarchical hierarchical_;
};

}  // namespace

void NcclHierarchy::end(Ending how) {
  // The reverse of their making, on every rank alike.
  for (std::unique_ptr<backends::NcclTransport>* sub : {&cross, &node}) {
    if (!*sub) continue;
    if (how == Ending::abort) (void)(*sub)->abort_owned();
    if (how == Ending::finalize) (void)(*sub)->finalize_owned();
    sub->reset();  // destroyed, unless aborted
  }
}

ncclResult_t make_nccl_hierarchy(ncclComm_t comm, int rank, int size, int device, int job_rank,
                                 std::optional<int> local_size, DeviceAllocator& allocator,
                                 NcclHierarchy* out) {
  *out = NcclHierarchy{};
  std::vector<NodeName> names;
  if (const ncclResult_t rc =
          exchange(comm, size, device, allocator, node_name(job_rank, local_size), &names);
      rc != ncclSuccess) {
    return rc;
  }
  // Each node named by its lowest rank: the same numbers on every rank.
  std::vector<int> node_of(size);
  for (int r = 0; r < size; ++r) {
    node_of[r] = r;
    for (int first = 0; first < r; ++first) {
      if (names[first] == names[r]) {
        node_of[r] = first;
        break;
      }
    }
  }
  out->split = split_by_node(node_of, rank);
  if (out->split.flat()) return ncclSuccess;
  if (!real::api().comm_split) {
    out->split.flat_because = "this NCCL has no ncclCommSplit (NCCL 2.18 and later have it)";
    return ncclSuccess;
  }
  backends::NcclTransport parent(comm, rank, size, nullptr);
  std::unique_ptr<backends::Transport> node, cross;
  const Status split = split_transports(parent, out->split, &node, &cross);
  if (!split.ok()) return backends::nccl_code(split);  // a node made alone goes with `node`
  out->node = as_nccl(std::move(node));
  out->cross = as_nccl(std::move(cross));
  return ncclSuccess;
}

bool nodes_take(const NcclHierarchy* nodes, ReductionPath route) {
  // PowerSGD and the sharded algorithm (int8) reduce flat on NCCL.
  return nodes && !nodes->flat() && (route == ReductionPath::cast || route == ReductionPath::topk);
}

bool runs_hierarchically(const CallPlan& p) {
  return p.compressed && !p.flat && p.call.datatype == ncclFloat32 &&
         nodes_take(p.nodes.get(), p.call.verdict.path);
}

std::size_t hierarchical_region_bytes(const CallPlan& p,
                                      const compressors::Compressor& compressor) {
  return region_of(p, compressor).total;
}

double hierarchical_wire_sent(const CallPlan& p, const compressors::Compressor& compressor) {
  const int local = p.nodes->node->size();
  const int nodes = p.nodes->cross->size();
  const std::size_t shard = Hierarchical::shard_count(p.call.count, local);
  double across = 0;
  if (p.call.verdict.path == ReductionPath::topk) {
    across = ring_allgather_wire_bytes(region_of(p, compressor).slot, nodes);
  } else {
    const auto& summable = compressors::kind_cast<compressors::SummableCompressor>(compressor);
    across = ring_allreduce_wire_bytes(algorithms::CastRing::wire_bytes(summable, shard), nodes);
  }
  return across + Hierarchical::intra_node_bytes(p.call.count, local);
}

std::unique_ptr<scheduler::Step> hierarchical_step(const CallPlan& p,
                                                   compressors::Compressor& compressor) {
  return std::make_unique<HierarchicalStep>(p, compressor);
}

void count_by_node(Counters& counted, const NcclHierarchy* nodes, bool hierarchical,
                   std::size_t count) {
  if (nodes) slimreduce::count_by_node(counted, nodes->split, hierarchical, count);
}

}  // namespace slimreduce
