// The real MPI functions behind the host simulation's MPI models
// (mpi_host_only.cc, mpi_cuda_aware.cc), each linked ahead of the real MPI.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace slimreduce::hostsim {

// The next definition of `name` after the calling library's (RTLD_NEXT);
// `who` names the model in the message when there is none.
template <class Fn>
Fn next_symbol(const char* who, const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (!fn) {
    std::fprintf(stderr, "%s: no %s after this library\n", who, name);
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace slimreduce::hostsim
