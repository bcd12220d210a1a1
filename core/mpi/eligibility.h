// Which calls SlimReduce may compress (invariant 2 of docs/architecture.md). Everything else
// reaches the real library with the caller's arguments, bit for bit.
#pragma once

#include <cstdint>

#include "core/runtime/settings.h"

namespace slimreduce {

// What the shim knows about a call, from its arguments alone: every rank
// derives the same facts from the same call, so every rank decides alike.
struct CallFacts {
  bool float32 = false;     // a predefined, contiguous 4-byte float type
  bool op_sum = false;      // the predefined SUM (a user-defined op never is)
  bool intracomm = false;   // an intercommunicator's allreduce crosses groups
  std::uint64_t bytes = 0;  // count x 4
  // Buffers we can read and write: neither null nor MPI_IN_PLACE as the
  // receive buffer, and not one buffer twice without MPI_IN_PLACE. The real
  // library reports such an erroneous call (MPI_ERR_BUFFER); ours would crash.
  bool usable_buffers = false;
  // More than one rank: a communicator of one sends nothing, so compressing
  // would only round the caller's values (MPI_COMM_SELF's sum is the input).
  bool several_ranks = true;
};

// usable_buffers for an allreduce's two buffer arguments.
bool usable_buffers(const void* sendbuf, const void* recvbuf, const void* in_place);

enum class Verdict { compress, pass_through };

// The part of the settings the decision reads, taken from them once (the hot
// path of a pass-through call compares no strings).
struct EligibilityRule {
  bool compressing = false;     // a compressor other than "none" is in use
  std::uint64_t min_bytes = 0;  // SLIMREDUCE_MIN_BYTES
};

EligibilityRule eligibility_rule(const Settings& settings);

inline Verdict classify(const CallFacts& facts, const EligibilityRule& rule) {
  const bool eligible = rule.compressing && facts.float32 && facts.op_sum && facts.intracomm &&
                        facts.usable_buffers && facts.several_ranks && facts.bytes > 0 &&
                        facts.bytes >= rule.min_bytes;
  return eligible ? Verdict::compress : Verdict::pass_through;
}

inline Verdict classify(const CallFacts& facts, const Settings& settings) {
  return classify(facts, eligibility_rule(settings));
}

}  // namespace slimreduce
