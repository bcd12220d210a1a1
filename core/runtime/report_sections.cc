#include "core/runtime/report_sections.h"

#include <cinttypes>
#include <cstdio>

namespace slimreduce {
namespace {

// The share of compressed calls sent at the hard level (0 with none).
double hard_share(const Counters& c) {
  const std::uint64_t leveled = c.adaptive_gentle + c.adaptive_hard;
  return leveled ? double(c.adaptive_hard) / double(leveled) : 0.0;
}

// "\"none\": 0.002000000, \"fp16\": 0.001500000": named seconds, a JSON object's members.
std::string seconds_json(const std::vector<std::pair<std::string, double>>& named) {
  std::string json;
  for (std::size_t m = 0; m < named.size(); ++m) {
    char one[96];
    std::snprintf(one, sizeof one, "%s\"%s\": %.9f", m ? ", " : "", named[m].first.c_str(),
                  named[m].second);
    json += one;
  }
  return json;
}

}  // namespace

// SLIMREDUCE_COMPRESSOR=auto: the probe calls, switches and choice table, after savings.
std::string auto_json(const Counters& c, const ReportContext& context) {
  if (!context.chooses) return {};
  std::string json = ",\n \"auto\": {\"probe_calls\": " + std::to_string(c.auto_probe_calls) +
                     ", \"switches\": " + std::to_string(c.auto_switches) +
                     ", \"waits\": " + std::to_string(c.auto_waits) + ", \"classes\": [";
  for (std::size_t i = 0; i < context.auto_choices.size(); ++i) {
    const AutoChoiceRow& row = context.auto_choices[i];
    char head[256];
    std::snprintf(head, sizeof head,
                  "%s\n  {\"comm\": %" PRIu64 ", \"min_bytes\": %" PRIu64
                  ", \"chosen\": \"%s\", \"probe_rounds\": %" PRIu64 ", \"switches\": %" PRIu64
                  ", \"calls\": %" PRIu64 ", \"resetting\": %s, \"reset_rounds\": %" PRIu64
                  ", \"median_seconds\": {",
                  i ? "," : "", row.comm_id, std::uint64_t{1} << row.size_class, row.chosen.c_str(),
                  row.probe_rounds, row.switches, row.calls, row.resetting ? "true" : "false",
                  row.reset_rounds);
    json += head;
    json += seconds_json(row.medians) + "}, \"cut_after_one_call_seconds\": {" +
            seconds_json(row.cut) + "}, \"left_out_predicted_seconds\": {" +
            seconds_json(row.predicted_out) + "}}";
  }
  return json + "]}";
}

std::string auto_medians_text(const AutoChoiceRow& row) {
  std::string medians;
  // "NAME<between>1.234 ms" for each, comma-separated after what is there.
  const auto add = [&medians](const std::vector<std::pair<std::string, double>>& named,
                              const char* between) {
    for (const auto& [name, seconds] : named) {
      char one[128];
      std::snprintf(one, sizeof one, "%s%s%s%.3f ms", medians.empty() ? "" : ", ", name.c_str(),
                    between, seconds * 1e3);
      medians += one;
    }
  };
  add(row.medians, " ");
  add(row.cut, " cut after one call at ");
  add(row.predicted_out, " left out, predicted at ");
  return medians;
}

// SLIMREDUCE_COMPRESSOR=auto's lines: the totals, then one line per size class.
std::string auto_table(const Counters& t, const ReportContext& context) {
  char text[512];
  std::snprintf(text, sizeof text,
                "  auto       %" PRIu64 " probe calls, %" PRIu64 " switches, %" PRIu64
                " waits; choices (agreed):\n",
                t.auto_probe_calls, t.auto_switches, t.auto_waits);
  std::string table = text;
  for (const AutoChoiceRow& row : context.auto_choices) {
    const std::string medians = auto_medians_text(row);
    std::snprintf(text, sizeof text,
                  "             comm %" PRIu64 ", calls of %" PRIu64 " B and up: %-6s (%s; %" PRIu64
                  " rounds, %" PRIu64 " switches, %" PRIu64 " calls%s)\n",
                  row.comm_id, std::uint64_t{1} << row.size_class,
                  row.chosen.empty() ? "-" : row.chosen.c_str(), medians.c_str(), row.probe_rounds,
                  row.switches, row.calls,
                  row.reset_rounds ? "; residuals reset: chosen among those that keep none" : "");
    table += text;
  }
  return table;
}

std::string levels_json(const Counters& c, const ReportContext& context) {
  if (context.levels.empty()) return {};
  char text[512];
  std::snprintf(text, sizeof text,
                ",\n \"adaptive\": {\"levels\": \"%s\", \"calls_gentle\": %" PRIu64
                ", \"calls_hard\": %" PRIu64 ", \"hard_share\": %.6f, \"switches\": %" PRIu64
                ", \"classes\": [",
                context.levels.c_str(), c.adaptive_gentle, c.adaptive_hard, hard_share(c),
                c.adaptive_switches);
  std::string json = text;
  for (std::size_t i = 0; i < context.level_rows.size(); ++i) {
    const LevelRow& row = context.level_rows[i];
    std::snprintf(text, sizeof text,
                  "%s\n  {\"comm\": %" PRIu64 ", \"min_bytes\": %" PRIu64
                  ", \"calls_gentle\": %" PRIu64 ", \"calls_hard\": %" PRIu64
                  ", \"windows\": %" PRIu64 ", \"critical\": %" PRIu64 ", \"switches\": %" PRIu64
                  "}",
                  i ? "," : "", row.comm_id, std::uint64_t{1} << row.size_class, row.gentle,
                  row.hard, row.windows, row.critical, row.switches);
    json += text;
  }
  return json + "]}";
}

std::string levels_table(const Counters& t, const ReportContext& context) {
  char text[512];
  std::snprintf(text, sizeof text,
                "  adaptive   levels %s: %" PRIu64 " calls gentle, %" PRIu64
                " hard (%.1f%% hard), %" PRIu64 " switches; per class (alike on every rank):\n",
                context.levels.c_str(), t.adaptive_gentle, t.adaptive_hard, 100.0 * hard_share(t),
                t.adaptive_switches);
  std::string table = text;
  for (const LevelRow& row : context.level_rows) {
    std::snprintf(text, sizeof text,
                  "             comm %" PRIu64 ", calls of %" PRIu64 " B and up: %" PRIu64
                  " gentle, %" PRIu64 " hard; %" PRIu64 " of %" PRIu64 " windows critical, %" PRIu64
                  " switches\n",
                  row.comm_id, std::uint64_t{1} << row.size_class, row.gentle, row.hard,
                  row.critical, row.windows, row.switches);
    table += text;
  }
  return table;
}

}  // namespace slimreduce
