// The paths the algorithm suite (algorithm_suite.h) runs on: a transport and
// the memory its collectives take, made once per executable after MPI_Init.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/mpi_transport.h"
#include "backends/transport.h"
#include "tests/mpi/algorithm_reference.h"

namespace slimreduce::testing {

namespace ref = reference;

// A transport and the memory its collectives take.
class Path {
 public:
  virtual ~Path() = default;
  virtual backends::Transport& transport() = 0;
  virtual std::byte* allocate(std::size_t bytes) = 0;
  virtual void release(std::byte* buffer) = 0;
  // Device memory: the host entry points (compress, finish) then work on host
  // twins of the buffers, copied over around communicate(), as the device
  // paths run kernels before and after the collective.
  virtual bool device_memory() const { return false; }
  virtual void to_device(std::byte*, const std::byte*, std::size_t) {}
  virtual void to_host(std::byte*, const std::byte*, std::size_t) {}
  virtual void synchronize() {}  // a stream-ordered transport's results are there after it
  // How this path orders 16-bit sums: the test's own statement, checked
  // against the transport's sums_natively().
  virtual ref::SumOrder sum_order() const { return ref::SumOrder::ring; }
};

// MpiTransport over a duplicate of MPI_COMM_WORLD; host memory unless told
// how to allocate (the host simulation's pinned memory, for staged_host).
class MpiPath final : public Path {
 public:
  using Allocate = std::function<std::byte*(std::size_t)>;
  using Release = std::function<void(std::byte*)>;
  explicit MpiPath(backends::MemoryKind memory, Allocate allocate = nullptr,
                   Release release = nullptr)
      : allocate_(std::move(allocate)), release_(std::move(release)) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm_, &rank);
    MPI_Comm_size(comm_, &size);
    transport_.emplace(comm_, rank, size, memory);
  }
  ~MpiPath() override {
    transport_.reset();
    MPI_Comm_free(&comm_);
  }
  backends::Transport& transport() override { return *transport_; }
  std::byte* allocate(std::size_t bytes) override {
    return allocate_ ? allocate_(bytes) : new std::byte[bytes];
  }
  void release(std::byte* buffer) override {
    if (release_) return release_(buffer);
    delete[] buffer;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::optional<backends::MpiTransport> transport_;
  Allocate allocate_;
  Release release_;
};

// The paths of this executable, by name: made after MPI_Init (they are
// collective), gone before MPI_Finalize.
using PathMakers = std::vector<std::pair<std::string, std::function<std::unique_ptr<Path>()>>>;
inline std::map<std::string, std::unique_ptr<Path>>& paths() {
  static std::map<std::string, std::unique_ptr<Path>> made;
  return made;
}
class PathsEnvironment final : public ::testing::Environment {
 public:
  explicit PathsEnvironment(PathMakers makers) : makers_(std::move(makers)) {}
  void SetUp() override {
    for (auto& [name, make] : makers_) paths()[name] = make();
  }
  void TearDown() override { paths().clear(); }

 private:
  PathMakers makers_;
};

}  // namespace slimreduce::testing
