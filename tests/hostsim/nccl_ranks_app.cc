// A job of several ranks (under mpirun) that calls ncclAllReduce as training
// frameworks do, on the host simulation of the GPU path: a few steps of
// gradient buckets in groups (sum and average), calls on two communicators in
// one group, a split communicator of another size, graph capture and replay,
// calls that must pass through, and a communicator destroyed and made again.
// Every rank can make every rank's inputs (seeded by call and rank), so each
// checks its result bit for bit against a model built from the CPU twins:
// compress each rank's input (with its residual), sum in rank order (the
// simulated NCCL's order; top-k's sum does not depend on it), widen, divide.
// Exit 0: all passed; 1: a check failed.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/element_rules.h"
#include "kernels/topk.h"

namespace {

namespace k = slimreduce::kernels;

#define CHECK(ok, what)                                         \
  do {                                                          \
    if (!(ok)) {                                                \
      std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, what); \
      MPI_Abort(MPI_COMM_WORLD, 1);                             \
    }                                                           \
  } while (0)
#define CUDA_OK(x) CHECK((x) == cudaSuccess, #x)
#define NCCL_OK(x) CHECK((x) == ncclSuccess, #x)

std::string env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

struct Mode {
  std::string compressor = env("SLIMREDUCE_COMPRESSOR", "none");
  bool topk = compressor == "topk";
  bool ef = env("SLIMREDUCE_ERROR_FEEDBACK", topk ? "1" : "0") == "1";
  double ratio = std::atof(env("SLIMREDUCE_TOPK_RATIO", "0.01").c_str());
  bool fp16_values = env("SLIMREDUCE_TOPK_VALUES", "fp32") == "fp16";
  unsigned warmup = static_cast<unsigned>(std::atoi(env("SLIMREDUCE_WARMUP_STEPS", "0").c_str()));
  std::size_t min_bytes = 65536;  // tests run with SLIMREDUCE_MIN_BYTES=64K
  k::HalfFormat format = compressor == "bf16" ? k::HalfFormat::bf16 : k::HalfFormat::fp16;
};
const Mode mode;
int failures = 0;
int checks = 0;
int world_rank = 0;

// A communicator as the job and the model see it.
struct Comm {
  ncclComm_t nccl = nullptr;
  int rank = 0;
  int size = 1;
  int id = 0;  // the model's name for it: a new one for each made
};

// One call: its inputs on every rank of the communicator (in its rank order).
struct Call {
  Comm* comm;
  float* send;
  float* recv;
  std::size_t n;
  ncclDataType_t type;
  ncclRedOp_t op;
  cudaStream_t stream;
  std::vector<std::vector<float>> inputs;  // per rank, as fp32 (16-bit types: widened)
};

// Gradient-like values with zeros and ties, the same on every process for (call, rank).
std::vector<float> values_for(unsigned call, int rank, std::size_t n, ncclDataType_t type) {
  std::mt19937 rng(call * 7919u + static_cast<unsigned>(rank) * 104729u + 1u);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    const unsigned pick = rng() % 100;
    x = pick == 0 ? 0.0f : pick == 1 ? (rng() & 1 ? 2.5f : -2.5f) : normal(rng) * (1 + rank);
    if (type == ncclFloat16) x = k::fp16_bits_to_float(k::float_to_fp16_bits(x));
    if (type == ncclBfloat16) x = k::bf16_bits_to_float(k::float_to_bf16_bits(x));
  }
  return v;
}

// ---- the model ----------------------------------------------------------------------------

struct Residual {
  std::size_t n = 0;
  ncclDataType_t type = ncclFloat32;
  std::vector<std::vector<float>> per_rank;
};
std::map<std::pair<int, const void*>, Residual> residuals;          // (comm id, recvbuff)
std::map<std::tuple<int, std::size_t, int>, unsigned> shapes_seen;  // warm-up, per shape

bool compressed(const Call& c) {
  if (mode.compressor == "none" || c.comm->size < 1) return false;
  if (c.op != ncclSum && c.op != ncclAvg) return false;
  const bool fp32 = c.type == ncclFloat32;
  if (!fp32 && !(mode.topk && (c.type == ncclFloat16 || c.type == ncclBfloat16))) return false;
  if (c.n * (fp32 ? 4 : 2) < mode.min_bytes) return false;
  return shapes_seen[{c.comm->id, c.n, c.type}]++ >= mode.warmup;
}

std::vector<std::vector<float>>* residual_of(const Call& c) {
  if (!mode.ef) return nullptr;
  Residual& r = residuals[{c.comm->id, c.recv}];
  if (r.n != c.n || r.type != c.type) r = {c.n, c.type, {}};
  r.per_rank.resize(c.comm->size, std::vector<float>(c.n, 0.0f));
  return &r.per_rank;
}

std::vector<float> summed_casts(const Call& c, std::vector<std::vector<float>>* res) {
  std::vector<std::uint16_t> acc(c.n), wire(c.n);
  for (int r = 0; r < c.comm->size; ++r) {
    std::uint16_t* out = r == 0 ? acc.data() : wire.data();
    k::compress(mode.format, c.inputs[r].data(), res ? (*res)[r].data() : nullptr, out, c.n);
    if (r > 0) k::accumulate(mode.format, wire.data(), acc.data(), c.n);
  }
  std::vector<float> sum(c.n);
  k::decompress(mode.format, acc.data(), sum.data(), c.n);
  return sum;
}

std::vector<float> summed_topk(const Call& c, std::vector<std::vector<float>>* res) {
  const std::size_t kk = k::topk_count(c.n, mode.ratio);
  const auto values = mode.fp16_values ? k::TopkValues::fp16 : k::TopkValues::fp32;
  std::vector<std::uint8_t> payload(k::topk_payload_bytes(kk, values));
  std::vector<float> sum(c.n, 0.0f);
  k::TopkScratch scratch;
  for (int r = 0; r < c.comm->size; ++r) {
    k::topk_compress(c.inputs[r].data(), res ? (*res)[r].data() : nullptr, c.n, kk, values,
                     payload.data(), scratch);
    k::topk_accumulate(payload.data(), kk, values, sum.data());
  }
  return sum;
}

// What this rank's recv must hold, as raw fp32 or 16-bit bits widened per element.
std::vector<float> expected(const Call& c) {
  const int size = c.comm->size;
  std::vector<float> out(c.n);
  if (compressed(c)) {
    std::vector<std::vector<float>>* res = residual_of(c);
    out = mode.topk ? summed_topk(c, res) : summed_casts(c, res);
    if (c.op == ncclAvg) {
      for (float& x : out) x = k::divide_keeping_nan(x, size);
    }
  } else {  // passed through: the simulated NCCL's rank-order sum, rounded to the type
    for (std::size_t i = 0; i < c.n; ++i) {
      float acc = c.inputs[0][i];
      for (int r = 1; r < size; ++r) {
        const float x = c.inputs[r][i];
        acc = c.op == ncclMax ? (acc < x ? x : acc) : acc + x;
        if (c.type == ncclFloat16) acc = k::fp16_bits_to_float(k::float_to_fp16_bits(acc));
        if (c.type == ncclBfloat16) acc = k::bf16_bits_to_float(k::float_to_bf16_bits(acc));
      }
      out[i] = c.op == ncclAvg ? acc / static_cast<float>(size) : acc;
    }
  }
  if (c.type == ncclFloat16) {
    for (float& x : out) x = k::fp16_bits_to_float(k::float_to_fp16_bits(x));
  } else if (c.type == ncclBfloat16) {
    for (float& x : out) x = k::bf16_bits_to_float(k::float_to_bf16_bits(x));
  }
  return out;
}

// ---- the job ---------------------------------------------------------------------------

unsigned next_call = 0;

// Writes this rank's input for the call into c.send (as the call's type).
Call prepare(Comm& comm, float* send, float* recv, std::size_t n, ncclDataType_t type,
             ncclRedOp_t op, cudaStream_t stream) {
  Call c{&comm, send, recv, n, type, op, stream, {}};
  const unsigned call = next_call++;
  for (int r = 0; r < comm.size; ++r) c.inputs.push_back(values_for(call, r, n, type));
  const std::vector<float>& mine = c.inputs[comm.rank];
  if (type == ncclFloat32) {
    CUDA_OK(cudaMemcpyAsync(send, mine.data(), n * 4, cudaMemcpyHostToDevice, stream));
  } else {
    std::vector<std::uint16_t> half(n);
    for (std::size_t i = 0; i < n; ++i)
      half[i] =
          type == ncclFloat16 ? k::float_to_fp16_bits(mine[i]) : k::float_to_bf16_bits(mine[i]);
    CUDA_OK(cudaMemcpyAsync(send, half.data(), n * 2, cudaMemcpyHostToDevice, stream));
  }
  return c;
}

void issue(const Call& c) {
  NCCL_OK(ncclAllReduce(c.send, c.recv, c.n, c.type, c.op, c.comm->nccl, c.stream));
}

void verify(const char* what, const Call& c) {
  std::vector<float> got(c.n);
  if (c.type == ncclFloat32) {
    CUDA_OK(cudaMemcpyAsync(got.data(), c.recv, c.n * 4, cudaMemcpyDeviceToHost, c.stream));
  } else {
    std::vector<std::uint16_t> half(c.n);
    CUDA_OK(cudaMemcpyAsync(half.data(), c.recv, c.n * 2, cudaMemcpyDeviceToHost, c.stream));
    for (std::size_t i = 0; i < c.n; ++i)
      got[i] =
          c.type == ncclFloat16 ? k::fp16_bits_to_float(half[i]) : k::bf16_bits_to_float(half[i]);
  }
  CUDA_OK(cudaStreamSynchronize(c.stream));
  const std::vector<float> want = expected(c);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < c.n; ++i) wrong += k::float_bits(got[i]) != k::float_bits(want[i]);
  ++checks;
  failures += wrong > 0;
  if (wrong || world_rank == 0) {
    std::printf("%s rank %d: %s (n %zu): %zu of %zu differ\n", wrong ? "FAIL" : "ok  ", world_rank,
                what, c.n, wrong, c.n);
  }
}

int next_comm_id = 0;
Comm make_world_comm() {
  Comm comm;
  MPI_Comm_rank(MPI_COMM_WORLD, &comm.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &comm.size);
  ncclUniqueId id;
  if (comm.rank == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  NCCL_OK(ncclCommInitRank(&comm.nccl, comm.size, id, comm.rank));
  comm.id = next_comm_id++;
  return comm;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  Comm world = make_world_comm();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::size_t sizes[3] = {70001, 262144, 1000};  // the last passes through (MIN_BYTES)
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, 4u << 20));
  CUDA_OK(cudaMalloc(&recv, 4u << 20));
  float* bucket_send[3] = {send, send + 80000, send + 400000};
  float* bucket_recv[3] = {recv, recv + 80000, recv + 400000};
  if (world_rank == 0)
    std::printf("compressor %s, error feedback %d, warm-up %u, %d ranks\n", mode.compressor.c_str(),
                mode.ef, mode.warmup, world.size);

  // Steps of three buckets in one group, sum then average: residuals carry over.
  for (int step = 0; step < 4; ++step) {
    const ncclRedOp_t op = step % 2 ? ncclAvg : ncclSum;
    std::vector<Call> calls;
    for (int b = 0; b < 3; ++b)
      calls.push_back(
          prepare(world, bucket_send[b], bucket_recv[b], sizes[b], ncclFloat32, op, stream));
    NCCL_OK(ncclGroupStart());
    for (const Call& c : calls) issue(c);
    NCCL_OK(ncclGroupEnd());
    for (const Call& c : calls) verify(op == ncclAvg ? "bucket, avg" : "bucket, sum", c);
  }

  // Alone, in place and out of place; a 16-bit tensor; calls that pass through.
  for (ncclDataType_t type : {ncclFloat32, ncclFloat16, ncclBfloat16}) {
    Call c = prepare(world, send, type == ncclFloat32 ? send : recv, 100000, type, ncclSum, stream);
    issue(c);
    verify(type == ncclFloat32 ? "alone, in place" : "16-bit tensor", c);
  }
  Call max = prepare(world, send, recv, 100000, ncclFloat32, ncclMax, stream);
  issue(max);
  verify("max passes through", max);

  // A split communicator (even and odd world ranks) and the world in one group.
  Comm half;
  NCCL_OK(ncclCommSplit(world.nccl, world.rank % 2, world.rank, &half.nccl, nullptr));
  NCCL_OK(ncclCommCount(half.nccl, &half.size));
  NCCL_OK(ncclCommUserRank(half.nccl, &half.rank));
  half.id = next_comm_id++ + 100 * (world.rank % 2);  // the two halves are different communicators
  for (int step = 0; step < 2; ++step) {
    // Both halves make the same number of calls, so the inputs' seeds stay aligned.
    Call a = prepare(half, bucket_send[0], bucket_recv[0], sizes[0], ncclFloat32, ncclAvg, stream);
    Call b = prepare(world, bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, stream);
    NCCL_OK(ncclGroupStart());
    issue(a);
    issue(b);
    NCCL_OK(ncclGroupEnd());
    verify("split communicator, avg", a);
    verify("world beside it, sum", b);
  }
  NCCL_OK(ncclCommDestroy(half.nccl));

  // Graph capture of a call whose workspace exists: replays, each with fresh inputs.
  Call warm =
      prepare(world, bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, stream);
  issue(warm);
  verify("before capture", warm);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, world.nccl,
                        stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    Call c = prepare(world, bucket_send[1], bucket_recv[1], sizes[1], ncclFloat32, ncclSum, stream);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    verify("graph replay", c);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));

  // Destroyed and made again: nothing of the old communicator's residuals remains.
  NCCL_OK(ncclCommDestroy(world.nccl));
  world = make_world_comm();
  Call again =
      prepare(world, bucket_send[0], bucket_recv[0], sizes[0], ncclFloat32, ncclSum, stream);
  issue(again);
  verify("communicator made again", again);
  NCCL_OK(ncclCommDestroy(world.nccl));

  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    std::printf("%s: %d checks per rank, %d failed in all\n", all_failures ? "FAILED" : "PASSED",
                checks, all_failures);
  MPI_Finalize();
  return all_failures ? 1 : 0;
}
