#include "core/nccl/eligibility.h"

#include <cerrno>
#include <cstdlib>

#include "core/runtime/compressor_choice.h"

namespace slimreduce {
namespace {

// NCCL_COMM_BLOCKING as NCCL reads it (ncclLoadParam: strtoll, base 0; an
// empty value or a conversion error leaves it unset): 0, 1, or -1 for "no say".
int env_blocking(const char* value) {
  if (!value || !*value) return -1;
  errno = 0;
  const long long parsed = std::strtoll(value, nullptr, 0);
  if (errno != 0 || (parsed != 0 && parsed != 1)) return -1;
  return static_cast<int>(parsed);
}

}  // namespace

ElemType nccl_elem(int datatype) {
  switch (datatype) {
    case kNcclFloat32:
      return ElemType::fp32;
    case kNcclFloat16:
      return ElemType::fp16;
    case kNcclBfloat16:
      return ElemType::bf16;
    default:
      return ElemType::other;
  }
}

CallFacts nccl_call_facts(int datatype, int op, std::uint64_t count, bool coll_config) {
  CallFacts facts;
  facts.elem = nccl_elem(datatype);
  facts.op = op == kNcclSum ? ReduceOp::sum : op == kNcclAvg ? ReduceOp::average : ReduceOp::other;
  facts.count = count;
  facts.usable_buffers = true;  // NCCL checks its own pointers; no in-place marker
  facts.coll_config = coll_config;
  return facts;
}

ReductionVerdict classify_nccl(const CallFacts& facts, const Settings& settings,
                               const compressors::Compressor* compressor) {
  return classify(facts, eligibility_rule(settings, compressor, kNcclRules), kNcclRules);
}

ReductionVerdict classify_nccl(const CallFacts& facts, const Settings& settings) {
  return classify_nccl(facts, settings, compressor_named(settings.compressor, settings).get());
}

bool nccl_blocking_mode(const NcclModeFacts& facts) {
  if (facts.init_in_progress) return false;
  if (const int env = env_blocking(facts.env_blocking); env >= 0) return env == 1;
  if (facts.has_config) {
    return facts.config_blocking == kNcclConfigUndefInt || facts.config_blocking != 0;
  }
  // No config: a split, shrink or grow inherits its parent's mode (a parent
  // we never saw: not known, never taken as blocking); an init gets NCCL's
  // default.
  return facts.parent != NcclParent::non_blocking && facts.parent != NcclParent::unknown;
}

NcclShape nccl_shape(bool queries_ok, int size) {
  if (!queries_ok) return NcclShape::never;
  return size < 1 ? NcclShape::later : NcclShape::ready;
}

}  // namespace slimreduce
