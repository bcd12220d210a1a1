// The report's optional sections (core/runtime/counters.h's report_json and
// report_table add them): SLIMREDUCE_COMPRESSOR=auto's choices and
// SLIMREDUCE_ADAPTIVE's levels.
#pragma once

#include <string>

#include "core/runtime/counters.h"

namespace slimreduce {

// ",\n \"auto\": {...}" after savings, or "" when the compressor does not choose.
std::string auto_json(const Counters& c, const ReportContext& context);
// The table's auto lines: the totals, then one line per size class.
std::string auto_table(const Counters& t, const ReportContext& context);
// ",\n \"adaptive\": {...}", or "" when levels do not adapt.
std::string levels_json(const Counters& c, const ReportContext& context);
// The table's adaptive lines: the levels, the share sent hard, one line per size class.
std::string levels_table(const Counters& t, const ReportContext& context);

}  // namespace slimreduce
