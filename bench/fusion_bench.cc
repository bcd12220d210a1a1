// The fusion benchmark (docs/performance.md): a ResNet-50-like backward pass
// handed over as MPI_Iallreduce calls, the last layer's gradients first, then
// an MPI_Wait for the first layer's (the forward pass's first tensor of at
// least --first-bytes, 64 KiB: SlimReduce's default SLIMREDUCE_MIN_BYTES, so
// a compressed one; handed over near the end, and the next forward pass
// needs it first) and one MPI_Waitall for the rest, as a framework
// overlapping communication with the backward pass does. Prints the median
// time per step and to the first layer's result (max over ranks) and,
// when libslimreduce.so is preloaded, what it counted; bench/fusion.sh runs
// it plain, fused and unfused, side by side, and gives the ratios.
// Usage: mpirun -np N fusion_bench [--tensors 200] [--steps 5] [--warmup 1] [--first-bytes 65536]
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// ResNet-50's trainable tensors in forward order: each convolution's weights
// and each batch norm's scale and shift; the classifier's weights and bias.
std::vector<std::size_t> resnet50_tensors() {
  std::vector<std::size_t> sizes = {7 * 7 * 3 * 64, 64, 64};
  auto conv_bn = [&sizes](std::size_t in, std::size_t out, std::size_t kernel) {
    sizes.insert(sizes.end(), {kernel * kernel * in * out, out, out});
  };
  const std::size_t widths[4] = {64, 128, 256, 512};
  const int blocks[4] = {3, 4, 6, 3};
  std::size_t channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    for (int block = 0; block < blocks[stage]; ++block) {
      const std::size_t width = widths[stage];
      conv_bn(channels, width, 1);
      conv_bn(width, width, 3);
      conv_bn(width, 4 * width, 1);
      if (block == 0) conv_bn(channels, 4 * width, 1);  // the shortcut's projection
      channels = 4 * width;
    }
  }
  sizes.insert(sizes.end(), {2048 * 1000, 1000});
  return sizes;  // 161 tensors, 25.6 million values
}

// `count` tensors: ResNet-50's, last layer first (the order backward
// produces them), continued from the last layer again past its 161.
std::vector<std::size_t> backward_order(std::size_t count) {
  std::vector<std::size_t> forward = resnet50_tensors();
  std::reverse(forward.begin(), forward.end());
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < count; ++i) sizes.push_back(forward[i % forward.size()]);
  return sizes;
}

double counter(const char* key) {
  using Fn = int (*)(const char*, double*);
  auto get = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "slimreduce_get_counter"));
  double value = -1;
  return get && get(key, &value) == 0 ? value : -1;
}

int arg_or(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int tensors = arg_or(argc, argv, "--tensors", 200);
  const int steps = arg_or(argc, argv, "--steps", 5);
  const int warmup = arg_or(argc, argv, "--warmup", 1);
  const std::vector<std::size_t> sizes = backward_order(tensors);
  // The first layer's tensor: the last handed over of at least --first-bytes.
  const std::size_t first_bytes = arg_or(argc, argv, "--first-bytes", 65536);
  std::size_t first_layer = sizes.size() - 1;
  while (first_layer > 0 && sizes[first_layer] * sizeof(float) < first_bytes) --first_layer;
  std::vector<std::vector<float>> gradients;
  std::size_t values = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    gradients.emplace_back(sizes[i]);
    for (std::size_t j = 0; j < sizes[i]; ++j)
      gradients[i][j] = float((j * 7 + i * 3 + rank) % 17) * 0.125f - 1.0f;
    values += sizes[i];
  }
  std::vector<std::vector<float>> results(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) results[i].resize(sizes[i]);
  std::vector<MPI_Request> requests(sizes.size());
  std::vector<double> times, firsts;
  for (int step = 0; step < warmup + steps; ++step) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      MPI_Iallreduce(gradients[i].data(), results[i].data(), int(sizes[i]), MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &requests[i]);
    }
    MPI_Wait(&requests[first_layer], MPI_STATUS_IGNORE);
    const double first_layer = MPI_Wtime() - start;
    MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    double took[2] = {MPI_Wtime() - start, first_layer}, slowest[2] = {0, 0};
    MPI_Allreduce(took, slowest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (step >= warmup) {
      times.push_back(slowest[0]);
      firsts.push_back(slowest[1]);
    }
  }
  std::sort(times.begin(), times.end());
  std::sort(firsts.begin(), firsts.end());
  // A check that the sums are sums: the first value of the first tensor.
  float first = 0;
  for (int r = 0; r < ranks; ++r) first += float((0 * 7 + 0 * 3 + r) % 17) * 0.125f - 1.0f;
  if (rank == 0) {
    std::printf("fusion_bench: %d ranks, %zu tensors, %.1f MiB per step, %d steps\n", ranks,
                sizes.size(), values * 4.0 / (1 << 20), steps);
    std::printf("median_ms %.1f  min_ms %.1f  max_ms %.1f\n", 1e3 * times[times.size() / 2],
                1e3 * times.front(), 1e3 * times.back());
    std::printf("first_layer_ms %.1f  (median; the first layer's MPI_Wait)\n",
                1e3 * firsts[firsts.size() / 2]);
    std::printf("first value %.4f (exact sum %.4f)\n", results[0][0], first);
    if (counter("calls.iallreduce") >= 0) {
      std::printf("this rank: iallreduce %.0f compressed %.0f fused_batches %.0f fused_tensors %.0f\n",
                  counter("calls.iallreduce"), counter("calls.compressed"),
                  counter("calls.fused_batches"), counter("calls.fused_tensors"));
    }
  }
  MPI_Finalize();
  return 0;
}
