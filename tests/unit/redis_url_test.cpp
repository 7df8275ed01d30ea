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
  expect_rejected("rediss://127.0.0.1", "TLS");
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
}

TEST(RedisUrlTest, NullWhyIsAllowed) { EXPECT_FALSE(parse_redis_url("nope")); }

}  // namespace
