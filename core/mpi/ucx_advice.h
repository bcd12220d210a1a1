// Advice on the MPI's own transport, given once: MPICH over UCX before 1.16
// sends each message above UCX's rendezvous threshold by protocol v1's
// rendezvous, whose data waits for a handshake through the link's queue.
// Over TCP our partitioned calls, many messages of a few hundred KiB,
// lost up to 17% (fp16) and 45% (int8) of their time to it on a 1 Gbit/s link
// (docs/performance.md section 14). We do not change UCX's settings
// ourselves: they are the whole job's (the one that gives TCP its time back
// sends shared memory's messages below 1 MiB eagerly too, and UCX 1.16's
// protocols slowed shared memory in one run here). We say which setting gives the time
// back, where it applies.
#pragma once

#include <optional>
#include <string>

namespace slimreduce::ucx_advice {

// What the advice depends on, gathered once in the process.
struct TransportFacts {
  bool mpich_over_ucx = false;  // MPI_Get_library_version names ch4:ucx
  unsigned ucx_major = 0;       // the process's UCX (ucp_get_version); 0.0 where unknown
  unsigned ucx_minor = 0;
  bool rendezvous_set = false;     // the user set UCX's rendezvous (the variables the line names)
  std::optional<std::string> tls;  // UCX_TLS, where set
  unsigned ranks_on_node = 1;
  bool spans_nodes = false;  // fewer ranks on this node than in the world
  bool rdma_device = false;  // /sys/class/infiniband lists a device
};

// Whether UCX carries some of the ranks' traffic over TCP: between nodes
// without an RDMA device (or with RDMA excluded), or inside a node whose
// shared-memory transports UCX_TLS leaves out.
bool tcp_carries_traffic(const std::optional<std::string>& tls, unsigned ranks_on_node,
                         bool spans_nodes, bool rdma_device);

// The one line to log, or nothing where the advice does not apply.
std::optional<std::string> rendezvous_advice(const TransportFacts& facts);

// The facts of this process (MPI initialized).
TransportFacts gather(unsigned ranks_on_node, int world_size);

}  // namespace slimreduce::ucx_advice
