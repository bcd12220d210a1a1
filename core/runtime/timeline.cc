#include "core/runtime/timeline.h"

namespace slimreduce {

Timeline::~Timeline() {
  if (file_) std::fclose(file_);
}

void Timeline::span(const char* name, double begin_us, double end_us, const std::string& args,
                    int lane) {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  held_.push_back({name, begin_us, end_us - begin_us, args, lane});
  // Full: written out now (the file is named by its first write).
  if (held_.size() >= kHeld) write_held();
}

void Timeline::know_rank(int rank) {
  std::lock_guard lock(mutex_);
  if (!file_) rank_ = rank;
}

void Timeline::write_held() {
  if (!file_) {
    const std::string path = prefix_ + "." + std::to_string(rank_) + ".json";
    file_ = std::fopen(path.c_str(), "w");
    if (!file_) {
      std::fprintf(stderr, "slimreduce: error: cannot write the timeline %s\n", path.c_str());
      held_.clear();
      prefix_.clear();  // off from here on
      return;
    }
    std::fputs("[\n", file_);
  }
  for (const Span& s : held_) {
    std::fprintf(file_,
                 "%s{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                 "\"dur\": %.3f, \"args\": {%s}}",
                 written_++ ? ",\n" : "", s.name, rank_, s.lane, s.begin_us, s.duration_us,
                 s.args.c_str());
  }
  held_.clear();
  std::fflush(file_);
}

void Timeline::finish() {
  std::lock_guard lock(mutex_);
  if (finished_ || !on()) return;
  finished_ = true;
  write_held();
  if (!file_) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

std::string span_args(const compressors::Compressor& compressor, std::uint64_t count,
                      std::size_t calls) {
  return span_args(compressor, count, calls, count * 4);
}

std::string span_args(const compressors::Compressor& compressor, std::uint64_t count,
                      std::size_t calls, std::uint64_t bytes) {
  return "\"compressor\": \"" + std::string(compressor.name()) +
         "\", \"count\": " + std::to_string(count) + ", \"bytes\": " + std::to_string(bytes) +
         ", \"calls\": " + std::to_string(calls);
}

void TimelinePhases::phase_ran(const scheduler::PhaseRun& run) {
  static const char* kNames[] = {"COMPRESS", "COMMUNICATE", "DECOMPRESS"};
  const char* name = kNames[static_cast<int>(run.phase)];
  if (run.steps < 2) return timeline_.span(name, run.begin_us, run.end_us, args_, run.lane);
  timeline_.span(name, run.begin_us, run.end_us,
                 args_ + ", \"partition\": " + std::to_string(run.step) +
                     ", \"partitions\": " + std::to_string(run.steps),
                 run.lane);
}

}  // namespace slimreduce
