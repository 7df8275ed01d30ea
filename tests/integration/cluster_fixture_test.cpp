// The cluster fixture itself, and Sluice's key slots against the server's CLUSTER KEYSLOT.
#include <gtest/gtest.h>

#include <string>

#include "redis/cluster/key_slot.hpp"
#include "support/cluster_fixture.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

TEST(ClusterFixtureTest, ThreeMastersKeySlotsAndAHandMadeMigration) {
  redis_cluster cluster;
  ASSERT_EQ(cluster.size(), 6u);
  EXPECT_EQ(cluster.masters().size(), 3u);

  // Our CRC16 and hash tags agree with Redis for plain, tagged, odd and binary-ish keys.
  for (int i = 0; i < 300; ++i) {
    const std::string keys[] = {"sluice:user:" + std::to_string(i),
                                "sluice:{t" + std::to_string(i) + "}:x", "{}" + std::to_string(i),
                                "a{" + std::to_string(i) + "}}", std::string(1, char(i % 256))};
    for (const auto& k : keys)
      EXPECT_EQ(redis::cluster::key_slot(k), cluster.server_key_slot(k)) << k;
  }

  // Move a slot holding a few keys; every key ends on the new owner.
  const std::uint16_t slot = redis::cluster::key_slot("{mig}");
  const auto from = cluster.master_of(slot);
  std::size_t to = cluster.masters().front();
  if (to == from) to = cluster.masters().back();
  auto src = cluster.client(from);
  for (int i = 0; i < 25; ++i) src.command({"SET", "{mig}" + std::to_string(i), "v"});
  cluster.begin_migration(slot, from, to);
  EXPECT_EQ(cluster.migrate_keys(slot, from, to), 25u);
  cluster.finish_migration(slot, from, to);
  cluster.wait_until_consistent(10s);
  EXPECT_EQ(cluster.master_of(slot), to);
  auto dst = cluster.client(to);
  EXPECT_EQ(dst.command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)})->integer, 25);
}

}  // namespace
}  // namespace sluice::test
