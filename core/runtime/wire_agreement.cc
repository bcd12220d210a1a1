#include "core/runtime/wire_agreement.h"

#include <algorithm>
#include <cstring>
#include <map>

#ifndef SLIMREDUCE_VERSION
#error "SLIMREDUCE_VERSION must be defined by the build (core/CMakeLists.txt)"
#endif

namespace slimreduce::wire_agreement {
namespace {

std::string field_at(const std::vector<char>& records, int rank, std::size_t field) {
  const char* start = records.data() + rank * kRecordBytes + field * kFieldBytes;
  return std::string(start, strnlen(start, kFieldBytes));
}

// "ranks 0, 2" or "rank 1".
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

const char* library_version() { return SLIMREDUCE_VERSION; }

std::vector<std::string> fields(const Settings& settings, const std::string& version) {
  std::vector<std::string> out = {"SLIMREDUCE_VERSION=" + version};
  for (const auto& [name, value] : wire_settings(settings)) out.push_back(name + "=" + value);
  return out;
}

std::vector<char> record(const std::vector<std::string>& fields) {
  std::vector<char> bytes(kRecordBytes, '\0');
  for (std::size_t f = 0; f < fields.size() && f < kFields; ++f) {
    const std::size_t length = std::min(fields[f].size(), kFieldBytes - 1);
    std::memcpy(bytes.data() + f * kFieldBytes, fields[f].data(), length);
  }
  return bytes;
}

Fingerprint fingerprint(const std::vector<char>& record) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : record) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return {{h, ~h}};
}

std::string describe_disagreement(const std::vector<char>& records, int ranks) {
  for (std::size_t field = 0; field < kFields; ++field) {
    std::map<std::string, std::vector<int>> holders;  // value -> ranks, values sorted
    std::vector<std::string> order;                   // values as first met in rank order
    for (int rank = 0; rank < ranks; ++rank) {
      const std::string value = field_at(records, rank, field);
      if (!holders.count(value)) order.push_back(value);
      holders[value].push_back(rank);
    }
    if (holders.size() < 2) continue;
    // One name on every rank: "NAME: a on ranks ..; b on rank .."; else whole fields.
    const std::size_t equals = order.front().find('=');
    const std::string name = order.front().substr(0, equals);
    const bool one_name = equals != std::string::npos &&
                          std::all_of(order.begin(), order.end(), [&](const std::string& v) {
                            return v.compare(0, equals + 1, name + "=") == 0;
                          });
    std::string line = "ranks disagree on " + (one_name ? name : "what shapes the wire") + ": ";
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::string shown = one_name ? order[i].substr(equals + 1) : order[i];
      line += (i ? "; " : "") + (shown.empty() ? "(nothing)" : shown) + " on " +
              rank_list(holders[order[i]]);
    }
    return line +
           " (every rank must run the same SlimReduce version with the same SLIMREDUCE_* "
           "settings that shape the wire)";
  }
  return "";
}

}  // namespace slimreduce::wire_agreement
