// A first-order model of one allreduce's time under each compressor
// (docs/scaling.md): what a first guess can rest on, and what the library's
// algorithms would cost at rank counts this machine cannot run.
//
// A call is the phases the library runs for it (the same algorithms and the
// same byte counts as the report's, from the compressor's own sizes):
//   time = compression (the fp32 input at the compressor's measured rate,
//          and the decoding of every payload a rank receives)
//        + per phase: messages x latency + the bytes the busiest link
//          carries / its rate.
// The busiest link depends on where the ranks are:
//   - one shared link (every rank on one host behind one emulated link, as
//     bench/netem.sh makes): it carries every rank's bytes;
//   - one node: each rank's own bytes at the node's (intra) rate;
//   - nodes of `per_node` ranks, one NIC each, rings laid out node by node:
//     a ring phase sends one rank's bytes through each NIC (one ring edge
//     leaves each node); an all-to-all phase sends the node's ranks' bytes
//     bound for other nodes: per_node x bytes x (ranks - per_node) / (ranks - 1).
// Flat algorithms only, plus the two-level one (fp32 inside a node,
// compressed across nodes) where there are nodes. Not modelled: overlap of
// compression with the wire, congestion, NCCL's protocol choices, PowerSGD's
// orthonormalisation (counted at the compressor's measured rate only).
// Pure logic: no MPI, NCCL or GPU.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compressors/compressor.h"

namespace slimreduce::cost {

struct Link {
  double bytes_per_s = 125e6;  // 1 Gbit/s
  double latency_s = 20e-6;    // per message
};

struct Layout {
  int ranks = 4;
  int per_node = 4;          // ranks on one node (sharing its NIC)
  bool shared_link = false;  // every rank's bytes through one link (one host, emulated)
  // CPU cores a node's ranks share for compression (0: at least one each).
  // Ranks beyond them wait for a core: their compression takes that much
  // longer (this project's 2-core host runs 4 ranks).
  int cores_per_node = 0;
  int nodes() const { return (ranks + per_node - 1) / per_node; }
};

// Where a phase's messages go.
enum class Pattern { ring, all_to_all };

struct Phase {
  double bytes = 0;  // this rank sends
  Pattern pattern = Pattern::ring;
  int messages = 0;          // this rank sends, one after another
  bool inside_node = false;  // the two-level algorithm's fp32 phases
  // The two-level algorithm's compressed phase: every rank of a node sends
  // its shard to other nodes at once, through the node's one link.
  bool across_nodes_only = false;
};

// The compressor's measured speed on this machine: fp32 input bytes a
// second for its compression (with its residual) and for its decoding.
// 0: free (not counted).
struct Rates {
  double compress = 0;
  double decode = 0;
};

struct Prediction {
  std::string algorithm;  // "ring", "gather", "sharded", "low rank", "two-level ..."
  double wire_bytes = 0;  // one rank sends, all phases
  double compute_s = 0;
  double wire_s = 0;
  double total_s() const { return compute_s + wire_s; }
};

// The phases of a flat call of n fp32 values over `ranks` ranks, as the
// library runs it (compressor nullptr: passed through, a plain ring), and
// the algorithm's name. The gathered compressor takes its own choice of
// gathered or sharded (prefers_sharded), as the library does.
std::vector<Phase> flat_phases(const compressors::Compressor* compressor, std::size_t n, int ranks,
                               std::string* algorithm);

// The two-level algorithm's phases (reduce-scatter inside each node in
// fp32, the node's shard compressed across nodes, allgather inside).
std::vector<Phase> two_level_phases(const compressors::Compressor* compressor, std::size_t n,
                                    const Layout& layout, std::string* algorithm);

// One phase's time on the layout's busiest link.
double phase_seconds(const Phase& phase, const Layout& layout, const Link& inter,
                     const Link& intra);

// The call's predicted time (hierarchical: the two-level algorithm; only
// where the layout has more than one node).
Prediction predict(const compressors::Compressor* compressor, std::size_t n, const Layout& layout,
                   const Link& inter, const Link& intra, const Rates& rates,
                   bool hierarchical = false);

}  // namespace slimreduce::cost
