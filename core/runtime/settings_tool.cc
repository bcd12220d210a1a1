// slimreduce-settings: prints the settings table (the source of
// docs/configuration.md), or checks the current environment the way
// MPI_Init will: `slimreduce-settings --check` exits 1 with the error line.
#include <cstdio>
#include <cstring>

#include "core/runtime/settings.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--check") == 0) {
    try {
      for (const auto& line : slimreduce::describe_settings(
               slimreduce::parse_settings(slimreduce::read_environment()))) {
        std::printf("%s\n", line.c_str());
      }
      return 0;
    } catch (const slimreduce::SettingsError& error) {
      std::fprintf(stderr, "slimreduce: error: %s\n", error.what());
      return 1;
    }
  }
  std::fputs(slimreduce::settings_markdown().c_str(), stdout);
  return 0;
}
