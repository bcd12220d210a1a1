#include "core/runtime/setting_values.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include "core/runtime/settings.h"

namespace slimreduce {

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

bool parse_flag(const std::string& value) {
  if (value == "0") return false;
  if (value == "1") return true;
  throw std::invalid_argument("not 0 or 1");
}

std::uint64_t parse_unsigned(const std::string& value) {
  std::uint64_t parsed = 0;
  const char* end = value.data() + value.size();
  auto [ptr, error] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || error != std::errc() || ptr != end)
    throw std::invalid_argument("not a count");
  return parsed;
}

double parse_real(const std::string& value) {
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("not a number");
  }
  if (used != value.size() || !std::isfinite(number)) throw std::invalid_argument("not a number");
  return number;
}

double parse_ratio(const std::string& value) {
  const double ratio = parse_real(value);
  if (ratio <= 0.0 || ratio > 1.0) throw std::invalid_argument("out of range");
  return ratio;
}

int parse_rank(const std::string& value) {
  const std::uint64_t rank = parse_unsigned(value);
  if (rank < 1 || rank > 64) throw std::invalid_argument("out of range");
  return static_cast<int>(rank);
}

double parse_min_compression(const std::string& value) {
  const double times = parse_real(value);
  if (times < 1.0) throw std::invalid_argument("out of range");
  return times;
}

std::uint64_t parse_byte_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) throw std::invalid_argument("no number");
  const std::uint64_t number = parse_unsigned(text.substr(0, digits));
  const std::string suffix = text.substr(digits);
  static const std::vector<std::pair<std::vector<std::string>, int>> kUnits = {
      {{"", "B"}, 0},
      {{"K", "KB", "KiB", "k", "kB"}, 10},
      {{"M", "MB", "MiB"}, 20},
      {{"G", "GB", "GiB"}, 30},
      {{"T", "TB", "TiB"}, 40}};
  for (const auto& [spellings, shift] : kUnits) {
    for (const auto& spelling : spellings) {
      if (suffix != spelling) continue;
      if (shift > 0 && number > (UINT64_MAX >> shift)) throw std::invalid_argument("too large");
      return number << shift;
    }
  }
  throw std::invalid_argument("unknown unit");
}

}  // namespace slimreduce
