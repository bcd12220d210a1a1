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

NcclElem nccl_elem(int datatype) {
  switch (datatype) {
    case kNcclFloat32:
      return NcclElem::fp32;
    case kNcclFloat16:
      return NcclElem::fp16;
    case kNcclBfloat16:
      return NcclElem::bf16;
    default:
      return NcclElem::other;
  }
}

std::uint64_t nccl_elem_bytes(NcclElem elem) {
  switch (elem) {
    case NcclElem::fp32:
      return 4;
    case NcclElem::fp16:
    case NcclElem::bf16:
      return 2;
    case NcclElem::other:
      break;
  }
  return 0;
}

ReductionVerdict classify_nccl(const NcclCallFacts& facts, const Settings& settings,
                               const compressors::Compressor* compressor) {
  using compressors::DeviceKernels;
  const NcclElem elem = nccl_elem(facts.datatype);
  const std::uint64_t bytes = facts.count * nccl_elem_bytes(elem);
  auto pass = [](const char* reason) {
    return ReductionVerdict{ReductionPath::pass_through, false, reason};
  };
  if (!compressor) return pass("compressor none");
  const DeviceKernels kernels = compressor->device_kernels();
  if (kernels == DeviceKernels::none) return pass("no GPU kernel for this compressor");
  // An algorithm, CTA counts, a launch event: honoured only by NCCL running the call itself.
  if (facts.coll_config) return pass("per-call config");
  if (facts.op != kNcclSum && facts.op != kNcclAvg) return pass("op");  // PreMulSum, max, ...
  if (elem == NcclElem::other) return pass("datatype");
  // A cast of 16-bit values to 16 bits saves nothing: only top-k takes them.
  if (elem != NcclElem::fp32 && kernels != DeviceKernels::topk) return pass("datatype");
  if (facts.count == 0 || bytes < settings.min_bytes) return pass("size");
  if (!facts.device_buffers) return pass("host buffer");
  if (!facts.blocking_comm || facts.comm_size < 1) return pass("communicator");
  if (facts.count > compressor->device_max_count()) return pass("size");
  const ReductionPath path = kernels == DeviceKernels::topk       ? ReductionPath::topk
                             : kernels == DeviceKernels::low_rank ? ReductionPath::low_rank
                             : kernels == DeviceKernels::sharded  ? ReductionPath::sharded
                                                                  : ReductionPath::cast;
  return ReductionVerdict{path, facts.op == kNcclAvg, ""};
}

ReductionVerdict classify_nccl(const NcclCallFacts& facts, const Settings& settings) {
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
