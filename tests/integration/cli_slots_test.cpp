// `sluice acquire`, `release` and `renew` against a real redis-server: a slot taken by one
// command stays held for the next one, exit statuses say held / refused / invalid.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_run.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

TEST(CliSlotsTest, AcquireHoldsASlotThatReleaseGivesBack) {
  redis_server redis;
  const std::vector<std::string> where{"--backend", redis.url(), "--key", "export"};
  auto with = [&](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), where.begin(), where.end());
    args.insert(args.end(), more.begin(), more.end());
    return run_sluice(args);
  };
  const std::vector<std::string> limit{"--limit", "1", "--lease-ttl", "1m"};
  const auto first = with({"acquire"}, limit);
  ASSERT_EQ(first.status, 0) << first.err;
  ASSERT_EQ(first.lines.size(), 1u);
  EXPECT_EQ(first.lines[0]["acquired"], true);
  EXPECT_EQ(first.lines[0]["expires_in_ms"], 60000);
  const std::string id = first.lines[0].value("slot", "");
  ASSERT_EQ(id.size(), 32u);

  const auto second = with({"acquire"}, limit);
  EXPECT_EQ(second.status, 1) << "the first command's slot is still held after it exited";
  ASSERT_EQ(second.lines.size(), 1u);
  EXPECT_EQ(second.lines[0]["acquired"], false);
  EXPECT_GT(second.lines[0]["retry_after_ms"].get<int>(), 0);

  EXPECT_EQ(with({"renew", "--slot", id}, limit).status, 0);
  const auto released = with({"release", "--slot", id}, {});
  EXPECT_EQ(released.status, 0) << released.err;
  ASSERT_EQ(released.lines.size(), 1u);
  EXPECT_EQ(released.lines[0]["released"], true);
  EXPECT_EQ(with({"release", "--slot", id}, {}).status, 1) << "not held any more";
  EXPECT_EQ(with({"renew", "--slot", id}, {}).status, 1);
  EXPECT_EQ(with({"acquire"}, limit).status, 0);

  EXPECT_EQ(with({"release", "--slot", "not-hex"}, {}).status, 2);
  EXPECT_EQ(with({"acquire"}, {"--limit", "0"}).status, 2);
  EXPECT_EQ(with({"acquire"}, {"--lease-ttl", "2h"}).status, 2);
}

TEST(CliSlotsTest, AcquireWaitsUpToItsBudget) {
  redis_server redis;
  const std::vector<std::string> args{"acquire", "--backend", redis.url(),   "--key", "k",
                                      "--limit", "1",         "--lease-ttl", "300ms"};
  ASSERT_EQ(run_sluice(args).status, 0);
  auto waited = args;
  waited.insert(waited.end(), {"--wait", "5s"});
  const auto r = run_sluice(waited);
  EXPECT_EQ(r.status, 0) << "the first slot's 300 ms lease ended within the 5 s wait: " << r.err;
}

}  // namespace
}  // namespace sluice::test
