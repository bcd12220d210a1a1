// What the Fortran entry points (interpose/mpi_fortran_shim.cc,
// mpi_fortran_requests.cc) share: the real Fortran bindings, and Fortran's
// MPI_IN_PLACE and MPI_BOTTOM as the C shims see them (what a Fortran buffer
// argument becomes before the engine is called).
#pragma once

#include <dlfcn.h>
#include <mpi.h>

#include <string>

namespace slimreduce::interpose {

// The real Fortran binding of `name`, from the MPI library loaded after us.
template <typename Fn>
Fn real_fortran(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Fortran's MPI_IN_PLACE and MPI_BOTTOM are addresses of common-block
// variables in the MPI library, under each compiler's mangling.
struct FortranSentinels {
  const void* in_place[3] = {};
  const void* bottom[3] = {};

  FortranSentinels() {
    const char* suffixes[3] = {"_", "", "__"};
    for (int i = 0; i < 3; ++i) {
      in_place[i] =
          dlsym(RTLD_DEFAULT, (std::string("mpi_fortran_in_place") + suffixes[i]).c_str());
      bottom[i] = dlsym(RTLD_DEFAULT, (std::string("mpi_fortran_bottom") + suffixes[i]).c_str());
    }
  }
  static bool among(const void* buffer, const void* const (&sentinels)[3]) {
    for (const void* sentinel : sentinels) {
      if (sentinel && sentinel == buffer) return true;
    }
    return false;
  }
};

// Looked up once: a dlsym per call cost a Fortran job's every MPI_ALLREDUCE
// about 2 us (7x a small call's own time, measured).
inline const FortranSentinels& sentinels() {
  static const FortranSentinels found;
  return found;
}

// A Fortran call's send and receive buffers in C terms: what Open MPI's own
// binding does before calling PMPI_*.
struct CSendRecv {
  const void* send;
  void* recv;
};
inline CSendRecv c_buffers(void* sendbuf, void* recvbuf) {
  const FortranSentinels& fortran = sentinels();
  const void* send = FortranSentinels::among(sendbuf, fortran.in_place) ? MPI_IN_PLACE
                     : FortranSentinels::among(sendbuf, fortran.bottom) ? MPI_BOTTOM
                                                                        : sendbuf;
  void* recv = FortranSentinels::among(recvbuf, fortran.bottom) ? MPI_BOTTOM : recvbuf;
  return {send, recv};
}

}  // namespace slimreduce::interpose
