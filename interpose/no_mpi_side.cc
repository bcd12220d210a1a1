// libslimreduce_nccl.so has no MPI engine: the C API answers from the NCCL
// engine alone (interpose/shim_base.h).
#include "interpose/shim_base.h"

namespace slimreduce::interpose::mpi_side {

bool up() { return false; }
const Settings* settings() { return nullptr; }
bool counters(Counters*) { return false; }
std::optional<bool> use_compressor(const std::string&) { return std::nullopt; }
std::optional<bool> set_topk_ratio(double) { return std::nullopt; }

}  // namespace slimreduce::interpose::mpi_side
