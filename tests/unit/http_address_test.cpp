// sluice::http addresses and CIDRs: lenient parsing of what proxies write, strict CIDRs.
#include <gtest/gtest.h>

#include <sluice/http/address.hpp>

namespace sluice::http {
namespace {

std::string canon(std::string_view text) {
  auto a = parse_ip(text);
  return a ? to_string(*a) : "<invalid>";
}

TEST(HttpAddressTest, ParsesTheSpellingsProxiesUse) {
  EXPECT_EQ(canon("192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(canon(" 192.0.2.1 "), "192.0.2.1");
  EXPECT_EQ(canon("192.0.2.1:8080"), "192.0.2.1");
  EXPECT_EQ(canon("2001:DB8::1"), "2001:db8::1");
  EXPECT_EQ(canon("[2001:db8::1]"), "2001:db8::1");
  EXPECT_EQ(canon("[2001:db8::1]:443"), "2001:db8::1");
  EXPECT_EQ(canon("fe80::1%eth0"), "fe80::1");
  EXPECT_EQ(canon("[fe80::1%25eth0]:80"), "fe80::1");
  EXPECT_EQ(canon("2001:0db8:0000:0000:0000:0000:0000:0001"), "2001:db8::1");
}

TEST(HttpAddressTest, FoldsIpv4MappedIpv6ToIpv4) {
  auto a = parse_ip("::ffff:192.0.2.1");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->v4);
  EXPECT_EQ(*a, *parse_ip("192.0.2.1"));
  EXPECT_EQ(canon("[::ffff:c000:0201]:99"), "192.0.2.1");
}

TEST(HttpAddressTest, RejectsMalformedAddressesWithoutThrowing) {
  for (const char* bad :
       {"", " ", "unknown", "_hidden", "192.0.2", "192.0.2.256", "192.0.2.1:", "192.0.2.1:99999",
        "192.0.2.1:80:80", "2001:db8::1::2", "[2001:db8::1", "[2001:db8::1]x",
        "[2001:db8::1]:", "[192.0.2.1]", "fe80::1%", "1.2.3.4/8", "example.com", "::g",
        "1111111111111111111111111111111111111111111111111111111111111111111111111111"}) {
    EXPECT_FALSE(parse_ip(bad)) << bad;
  }
}

TEST(HttpAddressTest, MasksToAPrefix) {
  EXPECT_EQ(to_string(mask(*parse_ip("2001:db8:1:2:3:4:5:6"), 64)), "2001:db8:1:2::");
  EXPECT_EQ(to_string(mask(*parse_ip("2001:db8:1:2:3:4:5:6"), 56)), "2001:db8:1::");
  EXPECT_EQ(to_string(mask(*parse_ip("2001:db8:1:2:3:4:5:6"), 60)), "2001:db8:1::");
  EXPECT_EQ(to_string(mask(*parse_ip("2001:db8:1:ff:3:4:5:6"), 60)), "2001:db8:1:f0::");
  EXPECT_EQ(to_string(mask(*parse_ip("203.0.113.77"), 24)), "203.0.113.0");
  EXPECT_EQ(to_string(mask(*parse_ip("203.0.113.77"), 0)), "0.0.0.0");
  EXPECT_EQ(to_string(mask(*parse_ip("203.0.113.77"), 200)), "203.0.113.77");
}

TEST(HttpAddressTest, ParsesCidrs) {
  auto c = parse_cidr("10.0.0.0/8");
  ASSERT_TRUE(c);
  EXPECT_EQ(to_string(*c), "10.0.0.0/8");
  EXPECT_TRUE(c->contains(*parse_ip("10.255.1.2")));
  EXPECT_FALSE(c->contains(*parse_ip("11.0.0.1")));
  EXPECT_TRUE(c->contains(*parse_ip("::ffff:10.1.1.1")));

  auto host = parse_cidr("127.0.0.1");
  ASSERT_TRUE(host);
  EXPECT_EQ(to_string(*host), "127.0.0.1/32");

  auto v6 = parse_cidr("2001:db8::/32");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->contains(*parse_ip("2001:db8:ffff::1")));
  EXPECT_FALSE(v6->contains(*parse_ip("2001:db9::1")));
  EXPECT_FALSE(v6->contains(*parse_ip("10.0.0.1")));

  auto all = parse_cidr("0.0.0.0/0");
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->contains(*parse_ip("198.51.100.1")));
  EXPECT_FALSE(all->contains(*parse_ip("::1")));

  auto mapped = parse_cidr("::ffff:10.0.0.0/104");
  ASSERT_TRUE(mapped);
  EXPECT_EQ(to_string(*mapped), "10.0.0.0/8");
}

TEST(HttpAddressTest, CidrErrorsSayWhatIsWrong) {
  auto why = [](std::string_view text) {
    std::string w;
    EXPECT_FALSE(parse_cidr(text, &w)) << text;
    return w;
  };
  EXPECT_EQ(why("10.0.0.0/33"), "\"10.0.0.0/33\": prefix must be 0..32 for IPv4");
  EXPECT_EQ(why("::/129"), "\"::/129\": prefix must be 0..128 for IPv6");
  EXPECT_EQ(why("10.1.2.3/8"),
            "\"10.1.2.3/8\": host bits are set below the prefix (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(why("10.0.0.0/x"), "\"10.0.0.0/x\": prefix must be a number 0..32 for IPv4");
  EXPECT_EQ(why("10.0.0.0/"), "\"10.0.0.0/\": prefix must be a number 0..32 for IPv4");
  EXPECT_EQ(why("localhost/8"), "\"localhost/8\": not an IPv4 or IPv6 address");
  EXPECT_EQ(why("[::1]/128"),
            "\"[::1]/128\": not an IP address (write the address without brackets, port or "
            "zone)");
  EXPECT_EQ(why(""), "\"\": empty CIDR (want e.g. 10.0.0.0/8 or 2001:db8::/32)");
  EXPECT_FALSE(parse_cidr("10.0.0.0/8/8"));
}

}  // namespace
}  // namespace sluice::http
