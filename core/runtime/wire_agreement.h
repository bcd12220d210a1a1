// Ranks that disagree on what shapes the wire send different collectives: one
// rank's top-k payload meets another's int8 parts, and the job crashes or
// hangs. So when a communicator is first used compressed, its ranks compare a
// fingerprint of the library version and every wire-shaping setting (one
// 16-byte MAX allreduce, by the side that owns the communicator); only when
// they differ do they gather each rank's record, and the job stops with one
// line naming the first setting that differs, its values and the ranks.
// Pure logic: the sides move the bytes (core/mpi/wire_check.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/settings.h"

namespace slimreduce::wire_agreement {

// A record: kFields fields of kFieldBytes, each "NAME=value" cut to
// kFieldBytes - 1 characters and zero-padded, so that ranks of two versions
// with other settings still exchange records of one size.
inline constexpr std::size_t kFieldBytes = 64;
inline constexpr std::size_t kFields = 32;
inline constexpr std::size_t kRecordBytes = kFieldBytes * kFields;

// This library's version (the build's SLIMREDUCE_VERSION).
const char* library_version();

// "SLIMREDUCE_VERSION=x", then "NAME=value" for each wire-shaping setting.
std::vector<std::string> fields(const Settings& settings, const std::string& version);
std::vector<char> record(const std::vector<std::string>& fields);

// The two words each rank MAX-reduces: {h, ~h} of its record's hash.
struct Fingerprint {
  std::uint64_t words[2];
};
Fingerprint fingerprint(const std::vector<char>& record);
// Whether every rank contributed the same hash, read from the MAX of every
// rank's words: the largest hash and the complement of the smallest agree.
inline bool all_agree(const Fingerprint& reduced) { return reduced.words[1] == ~reduced.words[0]; }

// Given every rank's record (ranks x kRecordBytes, in rank order), the line
// that names the first field where ranks differ, each value it has and the
// ranks that hold it; "" when every record is the same.
std::string describe_disagreement(const std::vector<char>& records, int ranks);

}  // namespace slimreduce::wire_agreement
