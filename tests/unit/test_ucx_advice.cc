// The advice on MPICH's UCX rendezvous (core/mpi/ucx_advice.h): given where
// UCX carries traffic over TCP, with UCX before 1.16, and the user has not
// chosen a rendezvous; quiet everywhere else.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>

#include "core/mpi/ucx_advice.h"

namespace slimreduce::ucx_advice {
namespace {

struct TcpCase {
  const char* name;
  std::optional<std::string> tls;
  unsigned ranks_on_node;
  bool spans_nodes;
  bool rdma_device;
  bool expected;
};

std::ostream& operator<<(std::ostream& out, const TcpCase& c) { return out << c.name; }

class TcpCarries : public ::testing::TestWithParam<TcpCase> {};

TEST_P(TcpCarries, AsUcxTlsAndTheLayoutSay) {
  const TcpCase& c = GetParam();
  EXPECT_EQ(tcp_carries_traffic(c.tls, c.ranks_on_node, c.spans_nodes, c.rdma_device), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TcpCarries,
    ::testing::Values(
        // UCX_TLS unset: shared memory inside a node, TCP between nodes unless RDMA is there.
        TcpCase{"one_node_default", std::nullopt, 4, false, false, false},
        TcpCase{"two_nodes_ethernet", std::nullopt, 4, true, false, true},
        TcpCase{"two_nodes_infiniband", std::nullopt, 4, true, true, false},
        TcpCase{"one_rank_a_node_ethernet", std::nullopt, 1, true, false, true},
        TcpCase{"all_two_nodes_ethernet", std::string("all"), 4, true, false, true},
        // A list: what it names.
        TcpCase{"tcp_self_one_node", std::string("tcp,self"), 4, false, false, true},
        TcpCase{"tcp_self_one_rank", std::string("tcp,self"), 1, false, false, false},
        TcpCase{"sm_tcp_one_node", std::string("sm,tcp,self"), 4, false, false, false},
        TcpCase{"posix_tcp_two_nodes", std::string("posix,cma,tcp,self"), 2, true, false, true},
        TcpCase{"rc_sm_two_nodes_no_tcp", std::string("rc,sm,self"), 4, true, true, false},
        TcpCase{"rc_tcp_two_nodes_infiniband", std::string("rc_x,sm,tcp"), 4, true, true, false},
        TcpCase{"sm_only_two_nodes", std::string("sm,self"), 4, true, false, false},
        // After '^': what it leaves out.
        TcpCase{"without_tcp", std::string("^tcp"), 4, true, false, false},
        TcpCase{"without_sm_one_node", std::string("^sm"), 4, false, false, true},
        TcpCase{"without_rc_two_nodes_infiniband", std::string("^rc,ud,dc"), 4, true, true, true},
        TcpCase{"without_cuda_one_node", std::string("^cuda_ipc"), 4, false, false, false}));

TransportFacts affected() {
  TransportFacts facts;
  facts.mpich_over_ucx = true;
  facts.ucx_major = 1;
  facts.ucx_minor = 13;
  facts.tls = "tcp,self";
  facts.ranks_on_node = 4;
  return facts;
}

TEST(RendezvousAdvice, NamesTheVersionAndTheSettingWhereItApplies) {
  const auto line = rendezvous_advice(affected());
  ASSERT_TRUE(line.has_value());
  EXPECT_NE(line->find("UCX 1.13"), std::string::npos) << *line;
  EXPECT_NE(line->find("UCX_RNDV_THRESH=1M"), std::string::npos) << *line;
  EXPECT_NE(line->find("docs/performance.md section 14"), std::string::npos) << *line;
}

TEST(RendezvousAdvice, QuietWhereItDoesNotApply) {
  TransportFacts facts = affected();
  facts.mpich_over_ucx = false;  // Open MPI, Intel MPI (libfabric), MPICH over OFI
  EXPECT_FALSE(rendezvous_advice(facts));
  facts = affected();
  facts.ucx_minor = 16;  // protocol v2 by default
  EXPECT_FALSE(rendezvous_advice(facts));
  facts = affected();
  facts.ucx_major = 2;
  facts.ucx_minor = 0;
  EXPECT_FALSE(rendezvous_advice(facts));
  facts = affected();
  facts.ucx_major = facts.ucx_minor = 0;  // no ucp_get_version in the process
  EXPECT_FALSE(rendezvous_advice(facts));
  facts = affected();
  facts.rendezvous_set = true;  // the user chose
  EXPECT_FALSE(rendezvous_advice(facts));
  facts = affected();
  facts.tls.reset();  // one node, shared memory
  EXPECT_FALSE(rendezvous_advice(facts));
}

TEST(RendezvousAdvice, EveryVersionBefore116Applies) {
  for (unsigned minor = 0; minor < 16; ++minor) {
    TransportFacts facts = affected();
    facts.ucx_minor = minor;
    EXPECT_TRUE(rendezvous_advice(facts)) << "UCX 1." << minor;
  }
}

}  // namespace
}  // namespace slimreduce::ucx_advice
