// The one place a compressor is seen as its kind: with_kind() hands `visit`
// the compressor as the class its aggregation() names. Each side's dispatch
// on what a call is (its route table) is one such visitor with an entry per
// kind, so a new kind that a side does not handle fails to compile there,
// and no code outside these tables downcasts a compressor.
#pragma once

#include <stdexcept>

#include "compressors/compressor.h"

namespace slimreduce::compressors {

// A visitor made of lambdas, one per kind: with_kind(c, Overloaded{[&](SummableCompressor& s)
// {...}, ...}).
template <class... Entries>
struct Overloaded : Entries... {
  using Entries::operator()...;
};
template <class... Entries>
Overloaded(Entries...) -> Overloaded<Entries...>;

template <class Visit>
decltype(auto) with_kind(Compressor& compressor, Visit&& visit) {
  switch (compressor.aggregation()) {
    case Aggregation::summable:
      return visit(static_cast<SummableCompressor&>(compressor));
    case Aggregation::gathered:
      return visit(static_cast<GatheredCompressor&>(compressor));
    case Aggregation::low_rank:
      return visit(static_cast<LowRankCompressor&>(compressor));
    case Aggregation::sharded:
      return visit(static_cast<ShardedCompressor&>(compressor));
  }
  throw std::logic_error("a compressor of no known kind");
}

template <class Visit>
decltype(auto) with_kind(const Compressor& compressor, Visit&& visit) {
  switch (compressor.aggregation()) {
    case Aggregation::summable:
      return visit(static_cast<const SummableCompressor&>(compressor));
    case Aggregation::gathered:
      return visit(static_cast<const GatheredCompressor&>(compressor));
    case Aggregation::low_rank:
      return visit(static_cast<const LowRankCompressor&>(compressor));
    case Aggregation::sharded:
      return visit(static_cast<const ShardedCompressor&>(compressor));
  }
  throw std::logic_error("a compressor of no known kind");
}

// The compressor as `Kind` where a route already says which kind it is (a
// side's step for that route): checked, so a route given the wrong kind
// fails loudly (std::logic_error) instead of reading the wrong object.
template <class Kind>
Kind& kind_cast(Compressor& compressor) {
  if (compressor.aggregation() != Kind::kAggregation)
    throw std::logic_error("a compressor of another kind than its route's");
  return static_cast<Kind&>(compressor);
}

template <class Kind>
const Kind& kind_cast(const Compressor& compressor) {
  if (compressor.aggregation() != Kind::kAggregation)
    throw std::logic_error("a compressor of another kind than its route's");
  return static_cast<const Kind&>(compressor);
}

}  // namespace slimreduce::compressors
