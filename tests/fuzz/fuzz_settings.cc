// libFuzzer target: the SLIMREDUCE_* environment (docs/reliability.md).
// The input is lines NAME=VALUE; parse_settings must either accept them or
// throw SettingsError naming a SLIMREDUCE_ variable (never another
// exception, never a crash), and what it accepts must describe itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/runtime/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace slimreduce;
  const std::string text(reinterpret_cast<const char*>(data), size);
  Environment env;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    const std::size_t eq = line.find('=');
    // Names as the environment would hand them: SLIMREDUCE_ first.
    if (eq != std::string::npos)
      env.emplace_back("SLIMREDUCE_" + line.substr(0, eq), line.substr(eq + 1));
    begin = end + 1;
  }
  try {
    const Settings settings = parse_settings(env);
    if (describe_settings(settings).empty()) std::abort();
  } catch (const SettingsError& error) {
    if (error.variable().rfind("SLIMREDUCE_", 0) != 0) std::abort();
  }
  return 0;
}
