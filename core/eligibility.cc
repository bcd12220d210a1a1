#include "core/eligibility.h"

namespace slimreduce {

EligibilityRule eligibility_rule(const Settings& settings) {
  return {settings.compressor != "none", settings.min_bytes};
}

}  // namespace slimreduce
