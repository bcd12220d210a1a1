// The settings that must be read together, checked once all are parsed
// (parse_settings): SLIMREDUCE_ADAPTIVE and the levels it needs. Each throws
// SettingsError naming the one variable to change.
#pragma once

#include "core/runtime/settings.h"

namespace slimreduce {

void check_together(const Settings& settings);

}  // namespace slimreduce
