// Client-IP derivation: forwarding headers are believed only from trusted proxies.
#include <gtest/gtest.h>

#include <sluice/http/client_ip.hpp>

namespace sluice::http {
namespace {

key_options trusting(std::initializer_list<const char*> cidrs) {
  key_options o;
  for (const char* c : cidrs) o.trusted_proxies.push_back(*parse_cidr(c));
  return o;
}

std::string client(const std::string& peer, const header_map& headers, const key_options& o) {
  request_facts f;
  f.peer = peer;
  f.headers = headers.lookup();
  return derive_client(f, o).key;
}

TEST(HttpClientIpTest, UntrustedPeerIsKeyedByItsOwnAddress) {
  const auto o = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client("198.51.100.7", {{"X-Forwarded-For", "203.0.113.1"}}, o), "198.51.100.7");
  EXPECT_EQ(client("198.51.100.7", {{"X-Forwarded-For", "10.0.0.1"}}, o), "198.51.100.7");
  EXPECT_EQ(client("198.51.100.7", {{"Forwarded", "for=203.0.113.1"}}, o), "198.51.100.7");
  // With no trusted proxies at all, nobody's header counts.
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "203.0.113.1"}}, key_options{}), "10.0.0.1");
}

TEST(HttpClientIpTest, TrustedPeerIsWalkedRightToLeft) {
  const auto o = trusting({"10.0.0.0/8", "192.168.0.0/16"});
  // One proxy.
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "203.0.113.9"}}, o), "203.0.113.9");
  // Several trusted hops; the client spoofed an extra entry on the left, which is ignored.
  EXPECT_EQ(
      client("10.0.0.1", {{"X-Forwarded-For", "1.2.3.4, 203.0.113.9, 192.168.1.1, 10.2.2.2"}}, o),
      "203.0.113.9");
  // Repeated header fields are one list in order.
  header_map split;
  split.add("X-Forwarded-For", "1.2.3.4, 203.0.113.9");
  split.add("x-forwarded-for", "192.168.1.1");
  EXPECT_EQ(client("10.0.0.1", split, o), "203.0.113.9");
  // Every hop trusted: the leftmost is the client.
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "10.9.9.9, 192.168.1.1"}}, o), "10.9.9.9");
  // No header: the peer.
  EXPECT_EQ(client("10.0.0.1", {}, o), "10.0.0.1");
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "  "}}, o), "10.0.0.1");
  // Ports some proxies add are dropped.
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "203.0.113.9:5555"}}, o), "203.0.113.9");
}

TEST(HttpClientIpTest, MalformedHopsFallBackToThePeer) {
  const auto o = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "203.0.113.9, garbage"}}, o), "10.0.0.1");
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "203.0.113.9,,10.1.1.1"}}, o), "10.0.0.1");
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "unknown"}}, o), "10.0.0.1");
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "999.1.1.1"}}, o), "10.0.0.1");
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", std::string(10000, ',')}}, o), "10.0.0.1");
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", std::string("1.2.3.4\0x", 9)}}, o), "10.0.0.1");
  // A malformed entry left of the first untrusted hop is never reached.
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "garbage, 203.0.113.9"}}, o), "203.0.113.9");
}

TEST(HttpClientIpTest, PeerThatIsNotAnAddress) {
  const auto o = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client("unix:/run/app.sock", {{"X-Forwarded-For", "203.0.113.9"}}, o),
            "unix:/run/app.sock");
  EXPECT_EQ(client("", {{"X-Forwarded-For", "203.0.113.9"}}, o), "");
  EXPECT_EQ(client("[::1]:8080", {}, o), "::/64");
}

TEST(HttpClientIpTest, ForwardedHeaderVariants) {
  auto o = trusting({"10.0.0.0/8", "2001:db8:ffff::/48"});
  o.header = forwarded_header::forwarded;
  const std::string peer = "10.0.0.1";
  EXPECT_EQ(client(peer, {{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}}, o),
            "192.0.2.60");
  EXPECT_EQ(client(peer, {{"Forwarded", "For=\"192.0.2.60:8080\""}}, o), "192.0.2.60");
  // Quoted IPv6 with brackets and a port, grouped by /64.
  EXPECT_EQ(client(peer, {{"Forwarded", "for=\"[2001:db8:cafe::17]:4711\""}}, o),
            "2001:db8:cafe::/64");
  // Several elements (and a second field), trusted ones skipped.
  EXPECT_EQ(client(peer,
                   {{"Forwarded", "for=198.51.100.1, for=192.0.2.43;proto=https, for=10.3.3.3"},
                    {"Forwarded", "for=\"[2001:db8:ffff::1]\""}},
                   o),
            "192.0.2.43");
  // Commas and semicolons inside quoted strings do not split.
  EXPECT_EQ(client(peer, {{"Forwarded", "by=\"a,b;c\";for=192.0.2.5"}}, o), "192.0.2.5");
  // Obfuscated identifiers written by a trusted proxy identify the client.
  EXPECT_EQ(client(peer, {{"Forwarded", "for=_hidden, for=10.1.1.1"}}, o), "_hidden");
  EXPECT_EQ(client(peer, {{"Forwarded", "for=\"_SEVKISEK\""}}, o), "_SEVKISEK");
  // `unknown`, a missing `for`, broken quoting: the peer.
  EXPECT_EQ(client(peer, {{"Forwarded", "for=unknown"}}, o), "10.0.0.1");
  EXPECT_EQ(client(peer, {{"Forwarded", "proto=https"}}, o), "10.0.0.1");
  EXPECT_EQ(client(peer, {{"Forwarded", "for=\"192.0.2.5"}}, o), "10.0.0.1");
  EXPECT_EQ(client(peer, {{"Forwarded", "for=\"[2001:db8::1\""}}, o), "10.0.0.1");
  EXPECT_EQ(client(peer, {{"Forwarded", "for="}}, o), "10.0.0.1");
  // Forwarded-only mode ignores X-Forwarded-For.
  EXPECT_EQ(client(peer, {{"X-Forwarded-For", "192.0.2.5"}}, o), "10.0.0.1");
}

TEST(HttpClientIpTest, OnlyTheConfiguredHeaderIsBelieved) {
  auto o = trusting({"10.0.0.0/8"});
  const header_map both{{"Forwarded", "for=192.0.2.1"}, {"X-Forwarded-For", "192.0.2.2"}};
  o.header = forwarded_header::x_forwarded_for;
  EXPECT_EQ(client("10.0.0.1", both, o), "192.0.2.2");
  o.header = forwarded_header::forwarded;
  EXPECT_EQ(client("10.0.0.1", both, o), "192.0.2.1");
  o.header = forwarded_header::forwarded_then_x_forwarded_for;
  EXPECT_EQ(client("10.0.0.1", both, o), "192.0.2.1");
  EXPECT_EQ(client("10.0.0.1", {{"X-Forwarded-For", "192.0.2.2"}}, o), "192.0.2.2");

  EXPECT_EQ(parse_forwarded_header("X-Forwarded-For"), forwarded_header::x_forwarded_for);
  EXPECT_EQ(parse_forwarded_header("forwarded"), forwarded_header::forwarded);
  EXPECT_EQ(parse_forwarded_header("forwarded_then_x_forwarded_for"),
            forwarded_header::forwarded_then_x_forwarded_for);
  EXPECT_FALSE(parse_forwarded_header("x-real-ip"));
  EXPECT_EQ(to_string(forwarded_header::forwarded), "forwarded");
}

TEST(HttpClientIpTest, Ipv6IsGroupedByPrefix) {
  key_options o;
  EXPECT_EQ(client("2001:db8:1:2:3:4:5:6", {}, o), "2001:db8:1:2::/64");
  EXPECT_EQ(client("2001:db8:1:2:ffff::1", {}, o), "2001:db8:1:2::/64");
  o.ipv6_prefix = 56;
  EXPECT_EQ(client("2001:db8:1:2ff:3:4:5:6", {}, o), "2001:db8:1:200::/56");
  o.ipv6_prefix = 48;
  EXPECT_EQ(client("2001:db8:1:2:3:4:5:6", {}, o), "2001:db8:1::/48");
  o.ipv6_prefix = 128;
  EXPECT_EQ(client("2001:db8:1:2:3:4:5:6", {}, o), "2001:db8:1:2:3:4:5:6");
  o.ipv4_prefix = 24;
  EXPECT_EQ(client("203.0.113.77", {}, o), "203.0.113.0/24");

  const auto id = derive_client(request_facts{"2001:db8::9", "", "", "", {}}, key_options{});
  ASSERT_TRUE(id.address);
  EXPECT_EQ(to_string(*id.address), "2001:db8::9");  // the address itself is not grouped
}

TEST(HttpClientIpTest, Ipv4MappedPeerIsIpv4) {
  auto o = trusting({"10.0.0.0/8"});
  EXPECT_EQ(client("::ffff:198.51.100.7", {}, o), "198.51.100.7");
  // A mapped peer inside an IPv4 trusted range is trusted.
  EXPECT_EQ(client("::ffff:10.0.0.1", {{"X-Forwarded-For", "::ffff:203.0.113.5"}}, o),
            "203.0.113.5");
}

}  // namespace
}  // namespace sluice::http
