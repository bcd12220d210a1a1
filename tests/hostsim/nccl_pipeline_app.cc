// Partitions and pipelining on the NCCL path (docs/architecture.md,
// "Partitions and pipelining"), several ranks under mpirun on the host
// simulation. Calls larger than SLIMREDUCE_PARTITION_BYTES (these runs: 64K)
// are cut into pieces, each reduced on its own; a cut call made outside any
// group runs its casts' or gathered top-k's pieces over a side stream, tied
// to the caller's by events (unless SLIMREDUCE_PIPELINE=0). Each result is
// checked bit for bit against the reference model run piece by piece (the
// pieces and their count written out again here), at 1, 2 and many pieces,
// counts that do not divide, sum and average, fp32 and 16-bit inputs, calls
// alone and in a group; the report's calls.partitions and calls.compressed,
// and whether the call ran over two streams (the simulated runtime counts
// each cudaStreamWaitEvent). Runs with SLIMREDUCE_PIPELINE=0 and =1 check
// against the same model, so pipelined and unpipelined give the same bits.
// Exit 0: all passed; 1: a check failed.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;

namespace {

const std::uint64_t kPartitionBytes = 64 << 10;  // the runs' SLIMREDUCE_PARTITION_BYTES
const bool pipeline_on = sim::env_or("SLIMREDUCE_PIPELINE", "auto") != "0";
// The pieces whose compress and finish are kernels alone: casts and gathered
// top-k. (A function: `mode` is another file's global, made in its own time.)
bool pipelinable() { return !mode.quant && !(mode.topk && mode.topk_algorithm == "sharded"); }

// The cut, written out again: the fewest near-equal pieces of at most
// kPartitionBytes, the first count % pieces one element longer.
std::vector<std::pair<std::size_t, std::size_t>> pieces_of(std::size_t n, std::size_t element) {
  const std::size_t per_piece = kPartitionBytes / element;
  const std::size_t count = (n + per_piece - 1) / per_piece;
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  for (std::size_t i = 0, begin = 0; i < count; ++i) {
    const std::size_t length = n / count + (i < n % count ? 1 : 0);
    pieces.push_back({begin, length});
    begin += length;
  }
  return pieces;
}

std::size_t element_of(ncclDataType_t type) { return type == ncclFloat32 ? 4 : 2; }

// The model's result for a cut call: each piece a call of its own (its
// residual keyed by where its stretch of the receive buffer starts).
std::vector<float> expected_cut(const Call& c) {
  const std::size_t element = element_of(c.model.type);
  std::vector<float> want;
  for (const auto& [begin, count] : pieces_of(c.model.n, element)) {
    sim::ModelCall piece = c.model;
    piece.n = count;
    piece.piece = true;
    piece.recv = static_cast<const char*>(c.model.recv) + begin * element;
    for (std::vector<float>& in : piece.inputs)
      in = std::vector<float>(in.begin() + begin, in.begin() + begin + count);
    const std::vector<float> part = model.expected(piece);
    want.insert(want.end(), part.begin(), part.end());
  }
  return want;
}

void verify_cut(const std::string& what, const Call& c) {
  const std::vector<float> got = read_back(c);
  const std::vector<float> want = expected_cut(c);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    wrong += slimreduce::reference::bits_of(got[i]) != slimreduce::reference::bits_of(want[i]);
  expect(wrong == 0, what + " (n " + std::to_string(got.size()) + ", " +
                         std::to_string(pieces_of(c.model.n, element_of(c.model.type)).size()) +
                         " pieces): " + std::to_string(wrong) + " values differ");
}

double counter(const char* key) {
  double value = -1;
  CHECK(slimreduce_get_counter(key, &value) == 0, key);
  return value;
}

// Pieces the report adds for a call: none for a call reduced whole.
double pieces_counted(std::size_t n, ncclDataType_t type) {
  const std::size_t pieces = pieces_of(n, element_of(type)).size();
  return pieces > 1 ? static_cast<double>(pieces) : 0;
}

// Calls alone: each cut (or not) and, where it can be, pipelined.
void check_alone(Comm& world, float* send, float* recv, cudaStream_t stream, int step) {
  // 1 piece (exactly the limit), 2, 7 (not dividing), 17; and a 16-bit input for top-k.
  // Each call its own stretch of the buffers: its residuals (a key per
  // receive buffer) carry over from step to step, as a job's would.
  const std::size_t sizes[] = {16384, 20000, 100003, 262147};
  std::size_t offset = 0;
  for (std::size_t n : sizes) {
    const ncclRedOp_t op = (step + n) % 2 ? ncclAvg : ncclSum;
    const Call c = prepare(world, send + offset, recv + offset, n, ncclFloat32, op, stream);
    offset += n + 64;
    const double partitions = counter("calls.partitions");
    const double compressed = counter("calls.compressed");
    const std::size_t waits = sim::stream_waits();
    issue(c);
    const std::string what =
        "step " + std::to_string(step) + ", alone, " + (op == ncclAvg ? "avg" : "sum");
    verify_cut(what, c);
    expect(counter("calls.partitions") - partitions == pieces_counted(n, ncclFloat32),
           what + ": calls.partitions counts its pieces");
    expect(counter("calls.compressed") - compressed == 1, what + ": counted as one call");
    const bool pipelined = pipeline_on && pipelinable() && pieces_of(n, 4).size() > 1;
    expect((sim::stream_waits() > waits) == pipelined,
           what + (pipelined ? ": ran over two streams" : ": ran on the caller's stream alone"));
  }
  if (mode.topk) {  // 16-bit inputs: top-k takes them, cut by their 2-byte elements
    const Call c =
        prepare(world, send + offset, recv + offset, 70001, ncclBfloat16, ncclSum, stream);
    issue(c);
    verify_cut("step " + std::to_string(step) + ", alone, bf16 input", c);
  }
}

// Calls in one group: cut, never pipelined (NCCL launches a group's
// collectives together), none fused with a piece.
void check_group(Comm& world, float* send, float* recv, cudaStream_t stream, int step) {
  const std::size_t sizes[] = {50001, 30000, 16384};
  std::vector<Call> calls;
  std::size_t offset = 500000;  // past check_alone's calls
  for (std::size_t n : sizes) {
    calls.push_back(prepare(world, send + offset, recv + offset, n, ncclFloat32, ncclSum, stream));
    offset += n + 64;
  }
  const double partitions = counter("calls.partitions");
  const std::size_t waits = sim::stream_waits();
  NCCL_OK(ncclGroupStart());
  for (const Call& c : calls) issue(c);
  NCCL_OK(ncclGroupEnd());
  for (const Call& c : calls) verify_cut("step " + std::to_string(step) + ", in a group", c);
  double pieces = 0;
  for (std::size_t n : sizes) pieces += pieces_counted(n, ncclFloat32);
  expect(counter("calls.partitions") - partitions == pieces, "a group's cut calls counted");
  expect(sim::stream_waits() == waits, "a group's calls ran on the caller's stream alone");
}

// A cut call captured into a graph whose workspace is too small (capture
// allocates nothing) passes through: as the caller made it, one ncclAllReduce
// of the whole, not one per piece.
void check_captured_pass_through(Comm& world, float* send, float* recv, cudaStream_t stream) {
  const std::size_t n = 900001;  // larger than any call before: no workspace for it
  const std::size_t received = sim::nccl_all_reduces_received();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, world.nccl, stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  expect(sim::nccl_all_reduces_received() - received == 1,
         "a cut call passed through in a graph is one ncclAllReduce of the whole");
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
  c.model.passes_through = true;
  CUDA_OK(cudaGraphLaunch(exec, stream));
  verify("a cut call passed through in a graph", c);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

}  // namespace

int main(int argc, char** argv) {
  start_job(&argc, &argv);
  CHECK(mode.warmup == 0, "runs without warm-up (the model's pieces do not count it)");
  Comm world = make_world_comm();
  cudaStream_t stream = make_job_stream();
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, 4u << 20));
  CUDA_OK(cudaMalloc(&recv, 4u << 20));
  if (world_rank == 0)
    std::printf("compressor %s, error feedback %d, pipeline %d, %d ranks, stream %s\n",
                mode.compressor.c_str(), mode.ef, pipeline_on, world.size,
                on_legacy_stream() ? "legacy" : "non-blocking");
  // Steps: the residuals of each piece carry over from step to step.
  for (int step = 0; step < 3; ++step) {
    check_alone(world, send, recv, stream, step);
    check_group(world, send, recv, stream, step);
  }
  // Casts and int8 need workspace in proportion to the call; top-k's pieces
  // need little, and would be captured compressed instead.
  if (mode.compressor != "none" && !mode.topk && !on_legacy_stream())
    check_captured_pass_through(world, send, recv, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  NCCL_OK(ncclCommDestroy(world.nccl));
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  if (!on_legacy_stream()) CUDA_OK(cudaStreamDestroy(stream));
  return finish_job();
}
