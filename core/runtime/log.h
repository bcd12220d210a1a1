// stderr logging gated by SLIMREDUCE_LOG_LEVEL, one line per message.
#pragma once

#include "core/runtime/settings.h"

namespace slimreduce {

// Prints "slimreduce[rank] LEVEL: message" when level is within threshold.
void log_line(LogLevel threshold, LogLevel level, int rank, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace slimreduce
