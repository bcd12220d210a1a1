// SLIMREDUCE_ADAPTIVE=accordion on the NCCL path (docs/architecture.md,
// "Adaptive levels"), several ranks under mpirun on the host simulation:
// steps of one group with two top-k (or PowerSGD) calls of different shapes, whose inputs
// jump 50x at different steps, so that their levels change apart and one
// group carries calls at both levels. Each shape's level is predicted here
// by the window rule written out again from the docs (windows of
// SLIMREDUCE_ADAPTIVE_WINDOW reduced calls; a window's mean norm against the
// last judged window at its level; the first gentle window critical; a
// window with calls at both levels not judged), fed each call's norm
// kNormLag calls of its shape later, as the NCCL path reads them; each
// result is checked bit for bit against the reference model at the level
// predicted (top-k's ratio, SLIMREDUCE_TOPK_RATIO's gentle or hard value, or
// PowerSGD's rank, SLIMREDUCE_POWERSGD_RANK's: its Q reseeded at a change;
// or quant's width, SLIMREDUCE_QUANT_BITS's: its owner residuals kept).
// A level the library did not follow, or followed a call early or late,
// changes a result's bits. The run must see both switches and a group whose
// calls' levels differ, or it fails. HOSTSIM_ADAPTIVE_TYPE=fp16 or bf16
// (top-k) sends 16-bit calls, whose norms are taken of their values widened
// (their jump 64x, a power of two, so that the scaled inputs stay exact).
// Exit 0: all passed; 1: a check failed.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "kernels/element_rules.h"
#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;
namespace k = slimreduce::kernels;

namespace {

constexpr std::size_t kNormLag = 2;  // a call's norm counts from its shape's second call after it
constexpr int kGentle = 0, kHard = 1;

// The window rule, from the docs' words.
struct Predicted {
  Predicted(std::size_t w, double t) : window(w), threshold(t) {}
  std::size_t window;
  double threshold;
  int level = kGentle;  // of the calls decided from now on
  std::size_t in_window = 0;
  double sum = 0;
  int window_level = kGentle;
  bool mixed = false;
  std::optional<double> last[2];
  std::deque<std::pair<int, double>> pending;  // (level sent at, norm), oldest first

  void record(int sent, double norm) {
    if (in_window == 0) window_level = sent;
    mixed = mixed || sent != window_level;
    sum += norm;
    if (++in_window < window) return;
    const double mean = sum / static_cast<double>(in_window);
    const bool judged = !mixed;
    in_window = 0;
    sum = 0;
    mixed = false;
    if (!judged) return;
    bool critical = true;
    if (std::isfinite(mean)) {
      std::optional<double>& before = last[window_level];
      critical = before ? std::fabs(mean - *before) > threshold * std::fabs(*before)
                        : window_level == kGentle;
      before = mean;
    }
    level = critical ? kGentle : kHard;
  }
  // The level of the shape's next call: the norms kNormLag calls old are in.
  int next() {
    while (pending.size() >= kNormLag) {
      record(pending.front().first, pending.front().second);
      pending.pop_front();
    }
    return level;
  }
};

double norm_of(const std::vector<float>& v) {
  double squares = 0;
  for (float x : v) squares += static_cast<double>(x) * x;
  return std::sqrt(squares);
}

// The call's inputs times `factor`, this rank's written again (as the call's type).
void scale(Call& c, float factor) {
  for (auto& input : c.model.inputs) {
    for (float& x : input) x *= factor;
  }
  const std::vector<float>& mine = c.model.inputs[c.comm->rank];
  if (c.model.type == ncclFloat32) {
    CUDA_OK(
        cudaMemcpyAsync(c.send, mine.data(), mine.size() * 4, cudaMemcpyHostToDevice, c.stream));
    return;
  }
  std::vector<std::uint16_t> half(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    half[i] = c.model.type == ncclFloat16 ? k::float_to_fp16_bits(mine[i])
                                          : k::float_to_bf16_bits(mine[i]);
  }
  CUDA_OK(cudaMemcpyAsync(c.send, half.data(), half.size() * 2, cudaMemcpyHostToDevice, c.stream));
}

ncclDataType_t type_of(const std::string& name) {
  if (name == "fp16") return ncclFloat16;
  if (name == "bf16") return ncclBfloat16;
  CHECK(name == "fp32", "HOSTSIM_ADAPTIVE_TYPE is fp32, fp16 or bf16");
  return ncclFloat32;
}

}  // namespace

int main(int argc, char** argv) {
  start_job(&argc, &argv);
  CHECK(mode.topk || mode.powersgd || mode.compressor == "quant",
        "runs with SLIMREDUCE_COMPRESSOR=topk, powersgd or quant");
  const std::string levels = sim::env_or(mode.topk       ? "SLIMREDUCE_TOPK_RATIO"
                                         : mode.powersgd ? "SLIMREDUCE_POWERSGD_RANK"
                                                         : "SLIMREDUCE_QUANT_BITS",
                                         "");
  CHECK(levels.find(',') != std::string::npos, "the compressor's setting gives two levels");
  const double value[2] = {std::atof(levels.c_str()),
                           std::atof(levels.c_str() + levels.find(',') + 1)};
  // The model at a level: top-k's ratio, PowerSGD's rank, or the quantizer's width.
  auto model_at = [&](int level) {
    model.mode().ratio = value[level];
    model.mode().powersgd_rank = static_cast<std::size_t>(value[level]);
    model.mode().quant_bits = static_cast<int>(value[level]);
  };
  const std::size_t window =
      std::strtoull(sim::env_or("SLIMREDUCE_ADAPTIVE_WINDOW", "10").c_str(), nullptr, 10);
  const double threshold = std::atof(sim::env_or("SLIMREDUCE_ADAPTIVE_THRESHOLD", "0.5").c_str());
  const ncclDataType_t type = type_of(sim::env_or("HOSTSIM_ADAPTIVE_TYPE", "fp32"));
  CHECK(type == ncclFloat32 || mode.topk, "16-bit calls with top-k (NCCL compresses no other)");
  const float jump = type == ncclFloat32 ? 50.0f : 64.0f;

  Comm world = make_world_comm();
  cudaStream_t stream = make_job_stream();
  const std::size_t sizes[2] = {70001, 262144};
  const int jump_at[2] = {14, 22};  // each shape's inputs 50x larger from this step on
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, 4u << 20));
  CUDA_OK(cudaMalloc(&recv, 4u << 20));
  float* bucket_send[2] = {send, send + 80000};
  float* bucket_recv[2] = {recv, recv + 80000};
  std::vector<Predicted> predicted(2, Predicted(window, threshold));
  int hard_calls = 0, back_to_gentle = 0, levels_apart = 0;
  for (int step = 0; step < 36; ++step) {
    std::vector<Call> calls;
    int level[2];
    for (int b = 0; b < 2; ++b) {
      calls.push_back(
          prepare(world, bucket_send[b], bucket_recv[b], sizes[b], type, ncclSum, stream));
      if (step >= jump_at[b]) scale(calls.back(), jump);
      const int before = predicted[b].level;
      level[b] = predicted[b].next();
      hard_calls += level[b] == kHard;
      back_to_gentle += before == kHard && level[b] == kGentle;
    }
    levels_apart += level[0] != level[1];
    NCCL_OK(ncclGroupStart());
    for (const Call& c : calls) issue(c);
    NCCL_OK(ncclGroupEnd());
    for (int b = 0; b < 2; ++b) {
      model_at(level[b]);
      const std::vector<float> want = model.expected(calls[b].model);
      const std::vector<float> got = read_back(calls[b]);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        wrong += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
      expect(wrong == 0, "step " + std::to_string(step) + ", bucket " + std::to_string(b) +
                             " at the " + (level[b] == kHard ? "hard" : "gentle") +
                             " level: " + std::to_string(wrong) + " values differ");
      predicted[b].pending.push_back({level[b], norm_of(want)});
    }
  }
  // The run is a test of switching only if it switched both ways and apart.
  expect(hard_calls > 0, "calls sent at the hard level: " + std::to_string(hard_calls));
  expect(back_to_gentle > 0,
         "shapes back to gentle after a jump: " + std::to_string(back_to_gentle));
  expect(levels_apart > 0,
         "groups whose two calls went at different levels: " + std::to_string(levels_apart));
  const slimreduce_counters counted = counters_now();
  expect(counted.compressed == 72, "calls compressed: " + std::to_string(counted.compressed));
  return end_job(world, send, recv, stream);
}
