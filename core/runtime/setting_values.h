// How the SLIMREDUCE_* settings' values are read and shown: the parsers the
// settings table (settings.cc) is built from. Each throws
// std::invalid_argument for a value it does not accept.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace slimreduce {

std::string join(const std::vector<std::string>& items, const char* separator = ", ");

template <typename Enum>
Enum parse_choice(const std::string& value,
                  const std::vector<std::pair<const char*, Enum>>& choices) {
  for (const auto& [text, choice] : choices) {
    if (value == text) return choice;
  }
  throw std::invalid_argument("not a choice");
}

template <typename Enum>
std::string show_choice(Enum value, const std::vector<std::pair<const char*, Enum>>& choices) {
  for (const auto& [text, choice] : choices) {
    if (value == choice) return text;
  }
  return "?";
}

bool parse_flag(const std::string& value);
// A whole number >= 0.
std::uint64_t parse_unsigned(const std::string& value);
// A finite real number, the whole text.
double parse_real(const std::string& value);
// A number in (0, 1]: a fraction of the values (top-k's ratio).
double parse_ratio(const std::string& value);
// SLIMREDUCE_POWERSGD_RANK: a whole number in [1, 64] (the CPU kernels hold
// r accumulators per row).
int parse_rank(const std::string& value);
// A real number >= 1 (how many times smaller the factors must be).
double parse_min_compression(const std::string& value);

// A compressor's levels: one value, or "gentle,hard" (two, each read by
// `parse_one`); three or more, or an empty one, are not accepted.
template <typename Value, typename Parse>
std::pair<Value, std::optional<Value>> parse_levels(const std::string& value, Parse parse_one) {
  const std::size_t comma = value.find(',');
  if (comma == std::string::npos) return {parse_one(value), std::nullopt};
  if (value.find(',', comma + 1) != std::string::npos)
    throw std::invalid_argument("more than two levels");
  return {parse_one(value.substr(0, comma)), parse_one(value.substr(comma + 1))};
}

// A number as the log and the wire agreement show it.
inline std::string show_real(double value) { return std::to_string(value); }

// A setting's one level, or its two as "gentle,hard".
template <typename Value>
std::string show_levels(Value only_or_gentle, const std::optional<Value>& hard) {
  auto one = [](Value value) {
    if constexpr (std::is_floating_point_v<Value>)
      return show_real(value);
    else
      return std::to_string(value);
  };
  return hard ? one(only_or_gentle) + "," + one(*hard) : one(only_or_gentle);
}

}  // namespace slimreduce
