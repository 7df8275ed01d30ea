// Parsing the MOVED and ASK error replies of Redis Cluster.
#include <gtest/gtest.h>

#include "redis/cluster/redirect.hpp"

namespace sluice::redis::cluster {
namespace {

TEST(ClusterRedirectTest, ParsesMovedAndAsk) {
  auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->type, redirect::kind::moved);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->target, (node_address{"127.0.0.1", 6381}));

  auto a = parse_redirect("ASK 16383 10.0.0.2:7000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->type, redirect::kind::ask);
  EXPECT_EQ(a->slot, 16383);
  EXPECT_EQ(a->target, (node_address{"10.0.0.2", 7000}));
}

TEST(ClusterRedirectTest, EmptyHostAndIpv6) {
  // Redis answers ":port" when the endpoint is unknown: same host as the one asked.
  auto m = parse_redirect("MOVED 1 :7001");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->target, (node_address{"", 7001}));
  auto v6 = parse_redirect("ASK 2 ::1:7002");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->target, (node_address{"::1", 7002}));
  auto bracketed = parse_redirect("ASK 2 [::1]:7002");
  ASSERT_TRUE(bracketed);
  EXPECT_EQ(bracketed->target, (node_address{"::1", 7002}));
}

TEST(ClusterRedirectTest, RejectsOtherErrorsAndMalformedText) {
  EXPECT_FALSE(parse_redirect("NOSCRIPT No matching script"));
  EXPECT_FALSE(parse_redirect("CLUSTERDOWN The cluster is down"));
  EXPECT_FALSE(parse_redirect("MOVED"));
  EXPECT_FALSE(parse_redirect("MOVED 3999"));
  EXPECT_FALSE(parse_redirect("MOVED 16384 127.0.0.1:7000"));  // beyond the last slot
  EXPECT_FALSE(parse_redirect("MOVED -1 127.0.0.1:7000"));
  EXPECT_FALSE(parse_redirect("MOVED 1 127.0.0.1"));
  EXPECT_FALSE(parse_redirect("MOVED 1 127.0.0.1:0"));
  EXPECT_FALSE(parse_redirect("MOVED 1 127.0.0.1:65536"));
  EXPECT_FALSE(parse_redirect("MOVED x 127.0.0.1:7000"));
  EXPECT_FALSE(parse_redirect("moved 1 127.0.0.1:7000"));
}

}  // namespace
}  // namespace sluice::redis::cluster
