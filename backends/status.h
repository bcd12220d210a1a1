// The outcome of a step below the runtime, in the error domain it came from
// (an MPI code, an ncclResult_t, a cudaError_t), so that one check macro
// serves every backend and the runtime turns it into what the caller's
// library would have returned (backends/mpi_transport.h: mpi_code;
// backends/nccl_transport.h: nccl_code).
#pragma once

#include <cstdint>

namespace slimreduce {

enum class ErrorDomain : std::uint8_t { none, mpi, nccl, cuda, no_memory, internal };

class Status {
 public:
  constexpr Status() = default;
  static constexpr Status mpi(int code) {
    return code == 0 ? Status() : Status(ErrorDomain::mpi, code);
  }
  static constexpr Status nccl(int code) {
    return code == 0 ? Status() : Status(ErrorDomain::nccl, code);
  }
  static constexpr Status cuda(int code) {
    return code == 0 ? Status() : Status(ErrorDomain::cuda, code);
  }
  static constexpr Status no_memory() { return Status(ErrorDomain::no_memory, 1); }
  // A step the backend cannot take (a bug of ours, never the caller's).
  static constexpr Status internal() { return Status(ErrorDomain::internal, 1); }

  constexpr bool ok() const { return domain_ == ErrorDomain::none; }
  constexpr ErrorDomain domain() const { return domain_; }
  constexpr int code() const { return code_; }
  constexpr bool operator==(const Status&) const = default;

 private:
  constexpr Status(ErrorDomain domain, int code) : domain_(domain), code_(code) {}
  ErrorDomain domain_ = ErrorDomain::none;
  int code_ = 0;
};

}  // namespace slimreduce

// Returns the status of `expr` from the calling function unless it is ok.
#define SLIMREDUCE_TRY(expr)                                                        \
  do {                                                                              \
    if (const ::slimreduce::Status status_ = (expr); !status_.ok()) return status_; \
  } while (0)
