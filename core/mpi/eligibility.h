// The MPI front of the shared classifier (core/runtime/eligibility.h): the
// facts of an MPI_Allreduce or MPI_Iallreduce, from its arguments alone.
#pragma once

#include <cstdint>

#include "core/runtime/eligibility.h"

namespace slimreduce {

// usable_buffers for an allreduce's two buffer arguments.
bool usable_buffers(const void* sendbuf, const void* recvbuf, const void* in_place);

// What MPI's handles told of a call: a predefined, contiguous 4-byte float
// type; the predefined SUM (a user-defined op never is); an intracommunicator
// (an intercommunicator's allreduce crosses groups) and its size.
struct MpiCall {
  bool float32 = false;
  bool op_sum = false;
  bool intracomm = false;
  int comm_size = 0;
  std::uint64_t count = 0;
  bool usable_buffers = false;
};

inline CallFacts mpi_call_facts(const MpiCall& call) {
  CallFacts facts;
  facts.elem = call.float32 ? ElemType::fp32 : ElemType::other;
  facts.op = call.op_sum ? ReduceOp::sum : ReduceOp::other;
  facts.count = call.count;
  facts.usable_buffers = call.usable_buffers;
  facts.comm_ready = call.intracomm;
  facts.comm_size = call.comm_size;
  // Host or device, MPI compresses both (whether a buffer is device memory is
  // asked only once the call is compressed).
  return facts;
}

// Eligible: no reason to pass it through. (Under SLIMREDUCE_COMPRESSOR=auto
// an eligible call has no route yet: its decision gives it its candidate's.)
inline bool mpi_compresses(const MpiCall& call, const EligibilityRule& rule) {
  return *classify(mpi_call_facts(call), rule, kMpiRules).reason == '\0';
}

}  // namespace slimreduce
