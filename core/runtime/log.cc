#include "core/runtime/log.h"

#include <cstdarg>
#include <cstdio>

namespace slimreduce {

void log_line(LogLevel threshold, LogLevel level, int rank, const char* format, ...) {
  if (static_cast<int>(level) > static_cast<int>(threshold)) return;
  static const char* kNames[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  char message[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  // One fprintf per line, so lines from threads do not interleave mid-line.
  std::fprintf(stderr, "slimreduce[%d] %s: %s\n", rank, kNames[static_cast<int>(level)], message);
}

}  // namespace slimreduce
