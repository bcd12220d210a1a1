#include "core/mpi/eligibility.h"

namespace slimreduce {

bool usable_buffers(const void* sendbuf, const void* recvbuf, const void* in_place) {
  if (recvbuf == nullptr || recvbuf == in_place || sendbuf == nullptr) return false;
  return sendbuf == in_place || sendbuf != recvbuf;
}

}  // namespace slimreduce
