#include "core/runtime/eligibility.h"

namespace slimreduce {

using compressors::Aggregation;
using compressors::DeviceKernels;

std::uint64_t CallFacts::bytes() const {
  switch (elem) {
    case ElemType::fp32:
      return count * 4;
    case ElemType::fp16:
    case ElemType::bf16:
      return count * 2;
    case ElemType::other:
      break;
  }
  return 0;
}

ReductionPath route_of(Aggregation aggregation) {
  switch (aggregation) {
    case Aggregation::summable:
      return ReductionPath::cast;
    case Aggregation::gathered:
      return ReductionPath::topk;
    case Aggregation::low_rank:
      return ReductionPath::low_rank;
    case Aggregation::sharded:
      return ReductionPath::sharded;
  }
  return ReductionPath::pass_through;
}

EligibilityRule eligibility_rule(const Settings& settings,
                                 const compressors::Compressor* compressor,
                                 const BackendRules& backend) {
  EligibilityRule rule;
  rule.min_bytes = settings.min_bytes;
  // auto: eligible calls get their route from the candidate each is sent
  // with (core/runtime/decision.h): fp32 sums (and averages where the
  // backend takes them) of any size above the floor. Where GPU kernels are
  // needed, each candidate's (and its size cap) are asked at its decision:
  // one that has none passes the call through as `none` would.
  if (!compressor) {
    rule.compressing = settings.chooses();
    if (backend.needs_device_kernels) {
      rule.route = ReductionPath::cast;  // the classifier's fp32-only route
      rule.kernels = compressors::DeviceKernels::cast16;
    }
    return rule;
  }
  rule.compressing = true;
  rule.route = route_of(compressor->aggregation());
  if (backend.needs_device_kernels) rule.kernels = compressor->device_kernels();
  if (backend.device_count_capped) rule.device_max_count = compressor->device_max_count();
  return rule;
}

ReductionVerdict classify(const CallFacts& facts, const EligibilityRule& rule,
                          const BackendRules& backend) {
  auto pass = [](const char* reason) {
    return ReductionVerdict{ReductionPath::pass_through, false, reason};
  };
  if (!rule.compressing) return pass("compressor none");
  if (backend.needs_device_kernels && rule.kernels == DeviceKernels::none)
    return pass("no GPU kernel for this compressor");
  // An algorithm, CTA counts, a launch event: honoured only by the library running the call itself.
  if (facts.coll_config) return pass("per-call config");
  const bool average = facts.op == ReduceOp::average && backend.takes_average;
  if (facts.op != ReduceOp::sum && !average) return pass("op");
  if (facts.elem == ElemType::other) return pass("datatype");
  // A cast of 16-bit values to 16 bits saves nothing: only top-k takes them.
  const bool sixteen_bit_ok = backend.takes_16bit_topk && rule.route == ReductionPath::topk;
  if (facts.elem != ElemType::fp32 && !sixteen_bit_ok) return pass("datatype");
  if (!facts.usable_buffers) return pass("buffers");
  if (facts.count == 0 || facts.bytes() < rule.min_bytes) return pass("size");
  if (backend.needs_device_buffers && !facts.device_buffers) return pass("host buffer");
  if (!facts.comm_ready || facts.comm_size < backend.fewest_ranks) return pass("communicator");
  if (backend.device_count_capped && facts.count > rule.device_max_count) return pass("size");
  return ReductionVerdict{rule.route, average, ""};
}

}  // namespace slimreduce
