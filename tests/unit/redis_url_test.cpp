#include <sluice/redis_backend.hpp>

#include <gtest/gtest.h>

namespace {

using sluice::parse_redis_url;

TEST(RedisUrlTest, HostOnlyUsesDefaults) {
  auto u = parse_redis_url("redis://localhost");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->db, 0);
  EXPECT_TRUE(u->user.empty());
  EXPECT_TRUE(u->password.empty());
}

TEST(RedisUrlTest, FullForm) {
  auto u = parse_redis_url("redis://alice:s3cret@127.0.0.1:6380/3");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->user, "alice");
  EXPECT_EQ(u->password, "s3cret");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 3);
}

TEST(RedisUrlTest, PasswordWithoutUser) {
  auto u = parse_redis_url("redis://:pw@127.0.0.1");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->user.empty());
  EXPECT_EQ(u->password, "pw");
}

TEST(RedisUrlTest, EmptyUserInfoMeansNoAuth) {
  auto u = parse_redis_url("redis://:@127.0.0.1");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->password.empty());
}

TEST(RedisUrlTest, PercentDecodesUserAndPassword) {
  auto u = parse_redis_url("redis://us%65r:p%40ss%3Aw%2Fd%25@127.0.0.1");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->user, "user");
  EXPECT_EQ(u->password, "p@ss:w/d%");
}

TEST(RedisUrlTest, LastAtEndsUserInfo) {
  auto u = parse_redis_url("redis://:a@b@127.0.0.1:7000");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->password, "a@b");
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 7000);
}

TEST(RedisUrlTest, Ipv6) {
  auto u = parse_redis_url("redis://[::1]:6390/2");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 6390);
  EXPECT_EQ(u->db, 2);
  auto v = parse_redis_url("redis://:pw@[::1]");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->host, "::1");
  EXPECT_EQ(v->port, 6379);
}

TEST(RedisUrlTest, TrailingSlashIsDbZero) {
  auto u = parse_redis_url("redis://127.0.0.1:6379/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->db, 0);
}

void expect_rejected(std::string_view url, std::string_view why_contains) {
  std::string why;
  EXPECT_FALSE(parse_redis_url(url, &why)) << url;
  EXPECT_NE(why.find(why_contains), std::string::npos) << url << " -> " << why;
}

TEST(RedisUrlTest, RejectsMalformedWithClearText) {
  expect_rejected("http://127.0.0.1", "redis://");
  expect_rejected("127.0.0.1:6379", "redis://");
  expect_rejected("redis://", "missing host");
  expect_rejected("redis://:6379", "missing host");
  expect_rejected("redis://127.0.0.1:", "empty port");
  expect_rejected("redis://127.0.0.1:0", "port must be 1..65535");
  expect_rejected("redis://127.0.0.1:65536", "port must be 1..65535");
  expect_rejected("redis://127.0.0.1:63x9", "port must be 1..65535");
  expect_rejected("redis://127.0.0.1/-1", "database");
  expect_rejected("redis://127.0.0.1/abc", "database");
  expect_rejected("redis://127.0.0.1/99999999999", "database");
  expect_rejected("redis://[::1", "closing ']'");
  expect_rejected("redis://[::1]x", "after the IPv6 host");
  expect_rejected("redis://::1", "brackets");
  expect_rejected("redis://pw@127.0.0.1", "[user]:password");
  expect_rejected("redis://alice:@127.0.0.1", "needs a password");
  expect_rejected("redis://:p%4@127.0.0.1", "percent-encoding in the password");
  expect_rejected("redis://:p%zz@127.0.0.1", "percent-encoding in the password");
  expect_rejected("redis://a%g1:pw@127.0.0.1", "percent-encoding in the user");
  expect_rejected("redis://127.0.0.1?db=1", "query");
  expect_rejected("redis://127.0.0.1#x", "fragment");
}

TEST(RedisUrlTest, PlainUrlHasNoTls) {
  auto u = parse_redis_url("redis://127.0.0.1");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->tls.enabled);
}

TEST(RedisUrlTest, RedissVerifiesByDefault) {
  auto u = parse_redis_url("rediss://:pw@redis.example:6380/2");
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->tls.enabled);
  EXPECT_TRUE(u->tls.verify);
  EXPECT_TRUE(u->tls.ca_file.empty());  // the system's CAs
  EXPECT_TRUE(u->tls.cert_file.empty());
  EXPECT_TRUE(u->tls.sni.empty());
  EXPECT_EQ(u->host, "redis.example");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 2);
  EXPECT_EQ(u->password, "pw");
}

TEST(RedisUrlTest, RedissAllOptions) {
  std::string why;
  auto u = parse_redis_url(
      "rediss://alice:s3cret@10.0.0.5:6390/1?ca=/etc/ca.pem&cert=/etc/c%20ert.pem"
      "&key=/etc/key.pem&sni=redis.internal&verify=no",
      &why);
  ASSERT_TRUE(u) << why;
  EXPECT_EQ(u->user, "alice");
  EXPECT_EQ(u->host, "10.0.0.5");
  EXPECT_EQ(u->port, 6390);
  EXPECT_EQ(u->db, 1);
  EXPECT_EQ(u->tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(u->tls.cert_file, "/etc/c ert.pem");  // percent-decoded
  EXPECT_EQ(u->tls.key_file, "/etc/key.pem");
  EXPECT_EQ(u->tls.sni, "redis.internal");
  EXPECT_FALSE(u->tls.verify);
}

TEST(RedisUrlTest, RedissOptionsWithoutPathOrPort) {
  auto u = parse_redis_url("rediss://[::1]?verify=yes&ca=ca.pem");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 6379);
  EXPECT_TRUE(u->tls.verify);
  EXPECT_EQ(u->tls.ca_file, "ca.pem");
  auto empty = parse_redis_url("rediss://127.0.0.1/?");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->tls.enabled);
}

TEST(RedisUrlTest, RejectsBadTlsOptions) {
  expect_rejected("redis://127.0.0.1?ca=ca.pem", "use rediss://");
  expect_rejected("redis://127.0.0.1?verify=no", "use rediss://");
  expect_rejected("rediss://127.0.0.1?verify=maybe", "verify must be yes or no");
  expect_rejected("rediss://127.0.0.1?cert=c.pem", "both cert=FILE and key=FILE");
  expect_rejected("rediss://127.0.0.1?key=k.pem", "both cert=FILE and key=FILE");
  expect_rejected("rediss://127.0.0.1?ca=a&ca=b", "given twice");
  expect_rejected("rediss://127.0.0.1?ca=", "needs a value");
  expect_rejected("rediss://127.0.0.1?ca", "name=value");
  expect_rejected("rediss://127.0.0.1?=x", "name=value");
  expect_rejected("rediss://127.0.0.1?ca=a%zz", "percent-encoding");
  expect_rejected("rediss://127.0.0.1?cafile=x", "unknown query option \"cafile\"");
  expect_rejected("rediss://127.0.0.1?ca=a&&verify=no", "name=value");
  expect_rejected("rediss://", "missing host");
  expect_rejected("redis:/127.0.0.1", "rediss://");
}

TEST(RedisUrlTest, NullWhyIsAllowed) { EXPECT_FALSE(parse_redis_url("nope")); }

}  // namespace
