// SLIMREDUCE_HIERARCHICAL=1 on the NCCL path, on the host simulation: several
// ranks under mpirun, nodes emulated by SLIMREDUCE_LOCAL_SIZE=L (blocks of L
// ranks). Each result is checked bit for bit against the model of
// reference_model.h (the CPU twins: fp32 node sums, then the compressor's sum
// of each shard over the nodes), the same on every rank, and for casts within
// the bound of a float64 sum; the report's node bytes against a computation
// by hand; the flat fallbacks (one node, nodes of unequal size, one rank per
// node, an NCCL without ncclCommSplit: built with HIERARCHICAL_APP_WITHOUT_SPLIT)
// with their one INFO line; and the sub-communicators made once per
// communicator and gone with it (destroy, abort, finalize).
// Exit 0: all passed; 1: a check failed.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/topk.h"
#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;

namespace {

namespace k = slimreduce::kernels;

const int kLocal = std::atoi(sim::env_or("SLIMREDUCE_LOCAL_SIZE", "1").c_str());
#ifdef HIERARCHICAL_APP_WITHOUT_SPLIT
constexpr bool kSplit = false;
#else
constexpr bool kSplit = true;
#endif
// A function, not a constant: `mode` is made in another file, maybe after this one's constants.
bool compressing() { return mode.compressor != "none"; }
int world_size = 1;
int flat_lines_expected = 0;  // this process's INFO lines "reduces flat"

// A communicator as nodes see it: job rank of each of its ranks.
struct Shape {
  std::vector<int> job_rank;
  int node_of(int r) const { return job_rank[r] / kLocal; }
  int size() const { return static_cast<int>(job_rank.size()); }
  // Equal nodes of two ranks or more, two nodes or more (algorithms::Hierarchical::flat_reason).
  bool nodes_allow() const {
    std::vector<int> per_node(world_size, 0);
    for (int r = 0; r < size(); ++r) ++per_node[node_of(r)];
    int nodes = 0, local = 0;
    for (int ranks : per_node) {
      if (ranks == 0) continue;
      if (local != 0 && ranks != local) return false;
      local = ranks;
      ++nodes;
    }
    return nodes >= 2 && local >= 2;
  }
  bool hierarchical() const { return compressing() && kSplit && nodes_allow(); }
};

Shape world_shape() {
  Shape s;
  for (int r = 0; r < world_size; ++r) s.job_rank.push_back(r);
  return s;
}

double counter(const char* key) {
  double value = 0;
  CHECK(slimreduce_get_counter(key, &value) == 0, key);
  return value;
}

struct NodeBytes {
  double inter_baseline = 0, inter_sent = 0, intra_baseline = 0, intra_sent = 0;
};
NodeBytes node_bytes_now() {
  return {counter("bytes.inter_node_baseline"), counter("bytes.inter_node_sent"),
          counter("bytes.intra_node_baseline"), counter("bytes.intra_node_sent")};
}

// A top-k payload's device slot for n values, by hand: k indices and k values,
// padded to 16 bytes.
double topk_slot(std::size_t n) {
  const double bytes =
      static_cast<double>(k::topk_count(n, mode.ratio)) * (4 + (mode.fp16_values ? 2 : 4));
  return std::ceil(bytes / 16) * 16;
}

// What one fp32 call of n values on comm adds to this rank's node bytes.
NodeBytes by_hand(const Shape& shape, int rank, std::size_t n, bool compressed) {
  const int ranks = shape.size();
  const double baseline = 2.0 * (ranks - 1) / ranks * n * 4;
  const bool crosses = shape.node_of((rank + 1) % ranks) != shape.node_of(rank);
  NodeBytes b;
  if (!compressing()) return b;  // no eligible call: the nodes are never learnt
  if (compressed && shape.hierarchical()) {
    const int nodes = ranks / kLocal;
    const double shard = static_cast<double>((n + kLocal - 1) / kLocal);
    (crosses ? b.inter_baseline : b.intra_baseline) = baseline;
    b.intra_sent = 2.0 * (kLocal - 1) * shard * 4;
    b.inter_sent = mode.topk ? (nodes - 1) * topk_slot(static_cast<std::size_t>(shard))
                             : 2.0 * (nodes - 1) / nodes * shard * 2;
    return b;
  }
  double sent = baseline;
  if (compressed) sent = mode.topk ? (ranks - 1) * topk_slot(n) : 2.0 * (ranks - 1) / ranks * n * 2;
  (crosses ? b.inter_baseline : b.intra_baseline) = baseline;
  (crosses ? b.inter_sent : b.intra_sent) = sent;
  return b;
}

bool near(double got, double want) {
  return std::fabs(got - want) <= 1e-9 * std::fabs(want) + 1e-6;
}

void expect_node_bytes(const NodeBytes& before, const NodeBytes& want, const std::string& what) {
  const NodeBytes now = node_bytes_now();
  const bool ok = near(now.inter_baseline - before.inter_baseline, want.inter_baseline) &&
                  near(now.inter_sent - before.inter_sent, want.inter_sent) &&
                  near(now.intra_baseline - before.intra_baseline, want.intra_baseline) &&
                  near(now.intra_sent - before.intra_sent, want.intra_sent);
  expect(ok, what + ": node bytes " + std::to_string(now.inter_sent - before.inter_sent) +
                 " across, " + std::to_string(now.intra_sent - before.intra_sent) +
                 " inside; by hand " + std::to_string(want.inter_sent) + ", " +
                 std::to_string(want.intra_sent));
}

// The result's bits are the same on every rank of the world.
void expect_same_everywhere(const Call& c, const std::string& what) {
  const std::vector<float> got = read_back(c);
  std::uint64_t hash = 1469598103934665603ull;
  for (float x : got) hash = (hash ^ k::float_bits(x)) * 1099511628211ull;
  std::uint64_t low = 0, high = 0;
  MPI_Allreduce(&hash, &low, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&hash, &high, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  expect(low == high, what + ": the same bits on every rank");
}

// A cast's result against the float64 sum: the node's fp32 sum, then 2M - 1
// 16-bit roundings (M nodes: once per node, then each hop of the sum across)
// where the flat ring has 2N - 1.
void expect_within_bound(const Call& c, int nodes, const std::string& what) {
  if (!compressing() || mode.topk) return;
  const std::vector<float> got = read_back(c);
  const double unit = mode.compressor == "fp16" ? 0x1p-11 : 0x1p-8;
  const double subnormal = mode.compressor == "fp16" ? 0x1p-25 : 0.0;
  const int roundings = 2 * nodes - 1;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double sum = 0, magnitude = 0;
    for (const std::vector<float>& in : c.model.inputs) {
      sum += in[i];
      magnitude += std::fabs(in[i]);
    }
    const double bound = roundings * (unit * magnitude * (1 + roundings * unit) + subnormal) +
                         world_size * 0x1p-24 * magnitude;
    wrong += std::fabs(got[i] - sum) > bound;
  }
  expect(wrong == 0,
         what + ": within the bound of a float64 sum (" + std::to_string(wrong) + " outside)");
}

// One fp32 call alone on comm, checked: bits, identity, node bytes.
Call reduce_alone(Comm& comm, const Shape& shape, float* send, float* recv, std::size_t n,
                  ncclRedOp_t op, cudaStream_t stream, const std::string& what) {
  const NodeBytes before = node_bytes_now();
  const std::uint64_t compressed_before = counters_now().compressed;
  Call c = prepare(comm, send, recv, n, ncclFloat32, op, stream);
  if (shape.hierarchical()) c.model.local_size = kLocal;
  issue(c);
  verify(what.c_str(), c);
  const bool compressed = counters_now().compressed > compressed_before;
  expect(compressed == (compressing() && n * 4 >= mode.min_bytes), what + ": compressed or not");
  expect_node_bytes(before, by_hand(shape, comm.rank, n, compressed), what);
  return c;
}

// A communicator of the world ranks with `color` (MPI_UNDEFINED: none), by key,
// made by ncclCommInitRank (the simulated NCCL splits the world for it).
Comm comm_of(int color, int key) {
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color, key, &sub);
  Comm comm;
  MPI_Comm_rank(sub, &comm.rank);
  MPI_Comm_size(sub, &comm.size);
  ncclUniqueId id{};
  if (comm.rank == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, sub);
  MPI_Comm_free(&sub);
  // The simulated NCCL splits the world for a communicator of two ranks or
  // more: a rank alone joins that split without a color.
  if (comm.size == 1) {
    MPI_Comm none = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none);
  }
  NCCL_OK(ncclCommInitRank(&comm.nccl, comm.size, id, comm.rank));
  comm.id = next_comm_id++;
  return comm;
}

// A communicator's first eligible call: its sub-communicators are made then
// (two, when its nodes allow), else it reduces flat with one INFO line.
void first_call(Comm& comm, const Shape& shape, float* send, float* recv, cudaStream_t stream,
                const std::string& what) {
  const std::size_t alive = sim::nccl_comms_alive();
  reduce_alone(comm, shape, send, recv, 70001, ncclSum, stream, what + ", first call");
  const std::size_t made = sim::nccl_comms_alive() - alive;
  expect(made == (shape.hierarchical() ? 2u : 0u),
         what + ": sub-communicators made: " + std::to_string(made));
  if (compressing() && !shape.hierarchical() && comm.rank == 0) ++flat_lines_expected;
}

// Buckets in groups, sum and average: compressed hierarchically from the
// hierarchy's making on, with nothing enqueued before the group's end and
// no host synchronization.
void bucket_steps(Comm& world, const Shape& shape, float* send, float* recv, cudaStream_t stream) {
  const std::size_t sizes[3] = {70001, 262144, 1000};  // the last passes through (MIN_BYTES)
  float* bucket_send[3] = {send, send + 80000, send + 400000};
  float* bucket_recv[3] = {recv, recv + 80000, recv + 400000};
  for (int step = 0; step < 4; ++step) {
    const ncclRedOp_t op = step % 2 ? ncclAvg : ncclSum;
    std::vector<Call> calls;
    for (int b = 0; b < 3; ++b) {
      calls.push_back(
          prepare(world, bucket_send[b], bucket_recv[b], sizes[b], ncclFloat32, op, stream));
      if (shape.hierarchical()) calls.back().model.local_size = kLocal;
    }
    const std::size_t work_before = sim::work_enqueued(stream);
    const std::size_t syncs_before = sim::host_syncs();
    NCCL_OK(ncclGroupStart());
    for (const Call& c : calls) issue(c);
    CHECK(sim::work_enqueued(stream) == work_before, "nothing enqueued before ncclGroupEnd");
    NCCL_OK(ncclGroupEnd());
    expect(sim::host_syncs() == syncs_before, "buckets: no host synchronization");
    for (const Call& c : calls) verify(op == ncclAvg ? "buckets, avg" : "buckets, sum", c);
    expect_same_everywhere(calls[1], "buckets");
  }
}

// In a group with the caller's call on a non-blocking communicator: the
// group's end answers ncclInProgress, which reaches the caller, and the
// hierarchical call finishes after it, right.
void beside_non_blocking(Comm& world, const Shape& shape, float* send, float* recv,
                         cudaStream_t stream) {
  Comm quick = make_world_comm(false);
  const std::size_t gathered = 1000;
  const std::vector<float> mine = sim::values_for(next_call++, world.rank, gathered, ncclFloat32);
  float* gather_send = send + 900000;
  float* gather_recv = recv + 900000;
  CUDA_OK(cudaMemcpyAsync(gather_send, mine.data(), gathered * 4, cudaMemcpyHostToDevice, stream));
  Call c = prepare(world, send, recv, 70001, ncclFloat32, ncclSum, stream);
  if (shape.hierarchical()) c.model.local_size = kLocal;
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllGather(gather_send, gather_recv, gathered, ncclFloat32, quick.nccl, stream));
  issue(c);
  const ncclResult_t end = ncclGroupEnd();
  expect(end == ncclInProgress,
         "beside a non-blocking call: the end in progress reaches the caller");
  wait_ready(quick.nccl);
  verify("beside a non-blocking call", c);
  std::vector<float> all(gathered * quick.size);
  CUDA_OK(cudaMemcpyAsync(all.data(), gather_recv, all.size() * 4, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect(std::memcmp(all.data() + gathered * quick.rank, mine.data(), gathered * 4) == 0,
         "beside a non-blocking call: the allgather");
  NCCL_OK(ncclCommDestroy(quick.nccl));
}

// A communicator ended three ways: its sub-communicators go with it.
void lifecycle(const Shape& shape, float* send, float* recv, cudaStream_t stream) {
  const std::size_t alive = sim::nccl_comms_alive();
  for (int cycle = 0; cycle < 6; ++cycle) {
    Comm comm = make_world_comm();
    reduce_alone(comm, shape, send, recv, 20000, ncclSum, stream, "cycle");
    if (compressing() && !shape.hierarchical() && comm.rank == 0) ++flat_lines_expected;
    const char* how = cycle % 3 == 0 ? "destroy" : cycle % 3 == 1 ? "abort" : "finalize, destroy";
    if (cycle % 3 == 1) {
      NCCL_OK(ncclCommAbort(comm.nccl));
    } else {
      if (cycle % 3 == 2) NCCL_OK(ncclCommFinalize(comm.nccl));
      NCCL_OK(ncclCommDestroy(comm.nccl));
    }
    model.forget(comm.id);
    const std::size_t left = sim::nccl_comms_alive();
    expect(left == alive, std::string("after ") + how + ": " + std::to_string(left - alive) +
                              " communicators left");
    expect(sim::nccl_comms_ended_before_their_splits() == 0,
           std::string(how) + ": the sub-communicators ended before their parent");
  }
}

// The first eligible call inside a group: no sub-communicator can be made
// there, so it reduces flat; the first call outside a group makes them.
void first_call_in_group(const Shape& shape, float* send, float* recv, cudaStream_t stream) {
  Comm comm = make_world_comm();
  const std::size_t alive = sim::nccl_comms_alive();
  Call c = prepare(comm, send, recv, 30000, ncclFloat32, ncclSum, stream);
  NCCL_OK(ncclGroupStart());
  issue(c);
  NCCL_OK(ncclGroupEnd());
  verify("first call in a group: flat", c);
  expect(sim::nccl_comms_alive() == alive, "first call in a group: no sub-communicator made");
  first_call(comm, shape, send, recv, stream, "then outside the group");
  NCCL_OK(ncclCommDestroy(comm.nccl));
  model.forget(comm.id);
}

// Communicators whose nodes do not allow it reduce flat.
void flat_communicators(const Comm& world, float* send, float* recv, cudaStream_t stream) {
  const int node = world_rank / kLocal, local = world_rank % kLocal;
  Comm within = comm_of(node, world_rank);
  Shape within_shape;
  for (int r = 0; r < within.size; ++r) within_shape.job_rank.push_back(node * kLocal + r);
  first_call(within, within_shape, send, recv, stream, "one node");
  NCCL_OK(ncclCommDestroy(within.nccl));
  model.forget(within.id);

  Comm across = comm_of(local, world_rank);
  if (across.size > 1) {
    Shape across_shape;
    for (int r = 0; r < across.size; ++r) across_shape.job_rank.push_back(r * kLocal + local);
    first_call(across, across_shape, send, recv, stream, "one rank per node");
  } else {
    next_call += 1;  // nodes of unequal size leave some ranks alone: seeds stay aligned
  }
  NCCL_OK(ncclCommDestroy(across.nccl));
  model.forget(across.id);

  // Every rank but the last: nodes of unequal size (or one node).
  const bool left = world_rank == world_size - 1;
  Comm shrunk{nullptr, world_rank, world_size - 1, next_comm_id++};
  if (!left) {
    int exclude[1] = {world_size - 1};
    NCCL_OK(ncclCommShrink(world.nccl, exclude, 1, &shrunk.nccl, nullptr, NCCL_SHRINK_DEFAULT));
    Shape shrunk_shape;
    for (int r = 0; r < shrunk.size; ++r) shrunk_shape.job_rank.push_back(r);
    first_call(shrunk, shrunk_shape, send, recv, stream, "every rank but the last");
    NCCL_OK(ncclCommDestroy(shrunk.nccl));
    model.forget(shrunk.id);
  } else {
    next_call += 1;  // the inputs' seeds stay aligned on every rank
  }
}

// Rank 0's stderr, kept to count the library's INFO lines.
struct CapturedStderr {
  int saved = -1;
  std::FILE* file = nullptr;
  void start() {
    std::fflush(stderr);
    file = std::tmpfile();
    saved = dup(2);
    dup2(fileno(file), 2);
  }
  std::string stop() {
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string text;
    std::rewind(file);
    for (int ch; (ch = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(ch));
    std::fclose(file);
    std::fputs(text.c_str(), stderr);  // shown as if never captured
    return text;
  }
};

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Captured once its workspace exists: the replays reduce hierarchically too.
void check_capture(Comm& world, const Shape& shape, float* send, float* recv, cudaStream_t stream) {
  Call warm = prepare(world, send, recv, 70001, ncclFloat32, ncclSum, stream);
  if (shape.hierarchical()) warm.model.local_size = kLocal;
  issue(warm);
  verify("before capture", warm);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(send, recv, 70001, ncclFloat32, ncclSum, world.nccl, stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    Call c = prepare(world, send, recv, 70001, ncclFloat32, ncclSum, stream);
    c.model.captured = true;
    if (shape.hierarchical()) c.model.local_size = kLocal;
    CUDA_OK(cudaGraphLaunch(exec, stream));
    verify("graph replay", c);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  CapturedStderr captured;
  const std::string level = sim::env_or("SLIMREDUCE_LOG_LEVEL", "warn");
  if (world_rank == 0 && (level == "info" || level == "debug")) captured.start();
  Comm world = make_world_comm();
  const Shape shape = world_shape();
  cudaStream_t stream = make_job_stream();
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, 4u << 20));
  CUDA_OK(cudaMalloc(&recv, 4u << 20));
  if (world_rank == 0)
    std::printf("compressor %s, %d ranks, nodes of %d, split %s: %s\n", mode.compressor.c_str(),
                world_size, kLocal, kSplit ? "yes" : "no",
                shape.hierarchical() ? "hierarchical" : "flat");

  first_call(world, shape, send, recv, stream, "world");
  bucket_steps(world, shape, send, recv, stream);
  beside_non_blocking(world, shape, send, recv, stream);

  // Alone: in place, counts that split evenly and counts that leave padding, sum and average.
  for (std::size_t n : {16385ul, 65536ul, 100003ul}) {
    for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
      const std::string what = "alone, n " + std::to_string(n) + (op == ncclAvg ? ", avg" : "");
      Call c = reduce_alone(world, shape, send, send, n, op, stream, what + ", in place");
      expect_same_everywhere(c, what);
      if (op == ncclSum)
        expect_within_bound(c, shape.hierarchical() ? world_size / kLocal : world_size, what);
    }
  }
  // A call below SLIMREDUCE_MIN_BYTES passes through, counted by node.
  reduce_alone(world, shape, send, recv, 1000, ncclSum, stream, "passed through");
  // A 16-bit top-k call on the same communicator reduces flat.
  for (ncclDataType_t type : {ncclFloat16, ncclBfloat16}) {
    Call c = prepare(world, send, recv, 100000, type, ncclSum, stream);
    issue(c);
    verify("16-bit tensor: flat", c);
  }

  if (!on_legacy_stream()) check_capture(world, shape, send, recv, stream);

  flat_communicators(world, send, recv, stream);
  first_call_in_group(shape, send, recv, stream);
  lifecycle(shape, send, recv, stream);

  const std::size_t alive = sim::nccl_comms_alive();
  NCCL_OK(ncclCommDestroy(world.nccl));
  expect(sim::nccl_comms_alive() == 0,
         "no communicator left after the world's (" + std::to_string(alive) + " before)");
  expect(sim::nccl_comms_ended_before_their_splits() == 0,
         "every communicator ended after its sub-communicators");
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  const std::size_t live = sim::device_bytes_live_settled();  // lifecycle() aborted one
  expect(live == 0, "device bytes left after every communicator went: " + std::to_string(live));
  if (world_rank == 0 && (level == "info" || level == "debug")) {
    const std::string log = captured.stop();
    const int flat_lines = count_of(log, "reduces flat, not hierarchically: ");
    expect(flat_lines == flat_lines_expected,
           "INFO lines for flat communicators: " + std::to_string(flat_lines) + ", expected " +
               std::to_string(flat_lines_expected));
    if (!kSplit && compressing() && shape.nodes_allow())
      expect(count_of(log, "this NCCL has no ncclCommSplit") > 0, "the reason: no ncclCommSplit");
  }
  return finish_job();
}
