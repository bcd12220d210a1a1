#include "core/eligibility.h"

namespace slimreduce {

Verdict classify(const CallFacts& facts, const Settings& settings) {
  const bool eligible = settings.compressor != "none" && facts.float32 && facts.op_sum &&
                        facts.intracomm && facts.bytes > 0 && facts.bytes >= settings.min_bytes;
  return eligible ? Verdict::compress : Verdict::pass_through;
}

}  // namespace slimreduce
