// redis+cluster:// and redis+sentinel:// URLs.
#include <gtest/gtest.h>

#include <sluice/redis_cluster.hpp>
#include <sluice/redis_sentinel.hpp>

namespace sluice {
namespace {

TEST(ClusterUrlTest, ClusterSeeds) {
  std::string why;
  auto u =
      parse_redis_cluster_url("redis+cluster://127.0.0.1:7000,127.0.0.1:7001,[::1]:7002", &why);
  ASSERT_TRUE(u) << why;
  ASSERT_EQ(u->seeds.size(), 3u);
  EXPECT_EQ(u->seeds[0].host, "127.0.0.1");
  EXPECT_EQ(u->seeds[0].port, 7000);
  EXPECT_EQ(u->seeds[1].port, 7001);
  EXPECT_EQ(u->seeds[2].host, "::1");
  EXPECT_EQ(u->seeds[2].port, 7002);
  EXPECT_TRUE(u->user.empty());
  EXPECT_TRUE(u->password.empty());
}

TEST(ClusterUrlTest, ClusterCredentialsAndDefaultPort) {
  auto u = parse_redis_cluster_url("redis+cluster://app:p%40ss,w@localhost,127.0.0.1:7001/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->user, "app");
  EXPECT_EQ(u->password, "p@ss,w");
  ASSERT_EQ(u->seeds.size(), 2u);
  EXPECT_EQ(u->seeds[0].host, "localhost");
  EXPECT_EQ(u->seeds[0].port, 6379);
  auto pw = parse_redis_cluster_url("redis+cluster://:secret@127.0.0.1:7000");
  ASSERT_TRUE(pw);
  EXPECT_TRUE(pw->user.empty());
  EXPECT_EQ(pw->password, "secret");
}

TEST(ClusterUrlTest, ClusterRejects) {
  std::string why;
  EXPECT_FALSE(parse_redis_cluster_url("redis://127.0.0.1:7000", &why));
  EXPECT_NE(why.find("redis+cluster://"), std::string::npos);
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://", &why));
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://127.0.0.1:7000,", &why));
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://127.0.0.1:7000,,h:1", &why));
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://127.0.0.1:70000", &why));
  EXPECT_NE(why.find("70000"), std::string::npos);
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://127.0.0.1:7000/1", &why));
  EXPECT_NE(why.find("database"), std::string::npos);
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://127.0.0.1:7000?x=1", &why));
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://user@127.0.0.1:7000", &why));
}

TEST(ClusterUrlTest, Sentinel) {
  std::string why;
  auto u = parse_redis_sentinel_url("redis+sentinel://127.0.0.1:26380,127.0.0.1/mymaster", &why);
  ASSERT_TRUE(u) << why;
  ASSERT_EQ(u->sentinels.size(), 2u);
  EXPECT_EQ(u->sentinels[0].port, 26380);
  EXPECT_EQ(u->sentinels[1].port, 26379);  // the sentinel default
  EXPECT_EQ(u->master_name, "mymaster");
  EXPECT_EQ(u->db, 0);
  auto db = parse_redis_sentinel_url("redis+sentinel://u:pw@[::1]:5000/m/3");
  ASSERT_TRUE(db);
  EXPECT_EQ(db->user, "u");
  EXPECT_EQ(db->password, "pw");
  EXPECT_EQ(db->sentinels[0].host, "::1");
  EXPECT_EQ(db->master_name, "m");
  EXPECT_EQ(db->db, 3);
}

TEST(ClusterUrlTest, SentinelRejects) {
  std::string why;
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1:26379", &why));
  EXPECT_NE(why.find("MASTER_NAME"), std::string::npos);
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1:26379/", &why));
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1:26379/m/x", &why));
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1:26379/m/-1", &why));
  EXPECT_FALSE(parse_redis_sentinel_url("redis+cluster://127.0.0.1:26379/m", &why));
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel:///m", &why));
}

TEST(ClusterUrlTest, ClusterTls) {
  std::string why;
  auto u = parse_redis_cluster_url(
      "rediss+cluster://:pw@127.0.0.1:7000,127.0.0.1:7001?ca=/ca.pem&sni=redis.test", &why);
  ASSERT_TRUE(u) << why;
  EXPECT_TRUE(u->tls.enabled);
  EXPECT_TRUE(u->tls.verify);
  EXPECT_EQ(u->tls.ca_file, "/ca.pem");
  EXPECT_EQ(u->tls.sni, "redis.test");
  EXPECT_EQ(u->password, "pw");
  ASSERT_EQ(u->seeds.size(), 2u);
  EXPECT_EQ(u->seeds[1].port, 7001);
  auto plain = parse_redis_cluster_url("redis+cluster://127.0.0.1:7000");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->tls.enabled);
  EXPECT_TRUE(validate_redis_url("rediss+cluster://127.0.0.1:7000?verify=no"));
}

TEST(ClusterUrlTest, ClusterTlsRejects) {
  std::string why;
  EXPECT_FALSE(parse_redis_cluster_url("redis+cluster://127.0.0.1:7000?ca=/ca.pem", &why));
  EXPECT_NE(why.find("rediss+cluster://"), std::string::npos) << why;
  EXPECT_FALSE(parse_redis_cluster_url("rediss+cluster://127.0.0.1:7000?x=1", &why));
  EXPECT_NE(why.find("unknown query option"), std::string::npos) << why;
  EXPECT_FALSE(parse_redis_cluster_url("rediss+cluster://127.0.0.1:7000/1?verify=no", &why));
  EXPECT_NE(why.find("database"), std::string::npos) << why;
}

TEST(ClusterUrlTest, SentinelPassword) {
  std::string why;
  auto u = parse_redis_sentinel_url(
      "redis+sentinel://:masterpw@127.0.0.1:26379,127.0.0.1:26380/mymaster/2"
      "?sentinel_password=s%26pw",
      &why);
  ASSERT_TRUE(u) << why;
  EXPECT_EQ(u->password, "masterpw");
  EXPECT_EQ(u->sentinel_password, "s&pw");  // percent-decoded
  EXPECT_TRUE(u->sentinel_user.empty());
  EXPECT_EQ(u->master_name, "mymaster");
  EXPECT_EQ(u->db, 2);
  EXPECT_FALSE(u->tls.enabled);
  auto acl = parse_redis_sentinel_url(
      "redis+sentinel://127.0.0.1/m?sentinel_user=watcher&sentinel_password=pw", &why);
  ASSERT_TRUE(acl) << why;
  EXPECT_EQ(acl->sentinel_user, "watcher");
  EXPECT_EQ(acl->sentinel_password, "pw");
  EXPECT_TRUE(acl->password.empty());  // the master has none
}

TEST(ClusterUrlTest, SentinelTls) {
  std::string why;
  auto u = parse_redis_sentinel_url(
      "rediss+sentinel://127.0.0.1:26379/m?sentinel_password=pw&ca=/ca.pem&verify=yes", &why);
  ASSERT_TRUE(u) << why;
  EXPECT_TRUE(u->tls.enabled);
  EXPECT_EQ(u->tls.ca_file, "/ca.pem");
  EXPECT_EQ(u->sentinel_password, "pw");
  EXPECT_TRUE(validate_redis_url("rediss+sentinel://127.0.0.1/m"));
}

TEST(ClusterUrlTest, SentinelOptionRejects) {
  std::string why;
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1/m?sentinel_user=u", &why));
  EXPECT_NE(why.find("sentinel_password"), std::string::npos) << why;
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1/m?ca=/ca.pem", &why));
  EXPECT_NE(why.find("rediss+sentinel://"), std::string::npos) << why;
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1/m?password=x", &why));
  EXPECT_NE(why.find("sentinel_password"), std::string::npos) << why;  // names the known ones
  EXPECT_FALSE(parse_redis_sentinel_url("redis+sentinel://127.0.0.1/m?sentinel_password=", &why));
  EXPECT_FALSE(parse_redis_sentinel_url(
      "redis+sentinel://127.0.0.1/m?sentinel_password=a&sentinel_password=b", &why));
  EXPECT_NE(why.find("twice"), std::string::npos) << why;
}

}  // namespace
}  // namespace sluice
