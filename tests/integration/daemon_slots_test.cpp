// sluiced's concurrency endpoints (/v1/acquire, /v1/release, /v1/renew) on a real process:
// the memory backend, and two sluiced sharing one redis-server so that the limit is the
// fleet's; the answers, the metrics, and the refusals of the wrong kind of policy.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const std::string policies = R"(
policies:
  api: {capacity: 5, refill_per_second: 1}
  reports:
    algorithm: concurrency
    limit: 2
    lease_ttl: 400ms
)";

http_reply post(std::uint16_t port, const std::string& path, const std::string& body) {
  return http_request(port, "POST", path, body, {{"Content-Type", "application/json"}});
}

std::string slot_body(const std::string& key, const std::string& id) {
  return R"({"key":")" + key + R"(","policy":"reports","slot":")" + id + "\"}";
}

TEST(DaemonSlotsTest, AcquireUpToTheLimitThenReleaseAndRenewById) {
  sluiced_process d(policies);
  const std::string acquire = R"({"key":"tenant","policy":"reports"})";
  const auto first = post(d.port(), "/v1/acquire", acquire);
  ASSERT_EQ(first.status, 200) << first.body;
  const auto a = json::parse(first.body);
  EXPECT_EQ(a["acquired"], true);
  EXPECT_EQ(a["in_flight"], 1);
  EXPECT_EQ(a["limit"], 2);
  EXPECT_EQ(a["expires_in_ms"], 400);
  const std::string id = a["slot"];
  EXPECT_EQ(id.size(), 32u);
  ASSERT_EQ(post(d.port(), "/v1/acquire", acquire).status, 200);

  const auto full = post(d.port(), "/v1/acquire", acquire);
  EXPECT_EQ(full.status, 429);
  const auto f = json::parse(full.body);
  EXPECT_EQ(f["acquired"], false);
  EXPECT_EQ(f["in_flight"], 2);
  EXPECT_GT(f["retry_after_ms"].get<int>(), 0);
  EXPECT_LE(f["retry_after_ms"].get<int>(), 400);
  EXPECT_EQ(full.header("Retry-After"), "1");
  // Another key has its own slots.
  EXPECT_EQ(post(d.port(), "/v1/acquire", R"({"key":"other","policy":"reports"})").status, 200);

  const auto renewed = post(d.port(), "/v1/renew", slot_body("tenant", id));
  EXPECT_EQ(renewed.status, 200) << renewed.body;
  EXPECT_EQ(json::parse(renewed.body)["expires_in_ms"], 400);
  EXPECT_EQ(post(d.port(), "/v1/release", slot_body("other", id)).status, 404)
      << "the id is tenant's slot, not other's";
  const auto released = post(d.port(), "/v1/release", slot_body("tenant", id));
  EXPECT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(json::parse(released.body)["in_flight"], 1);
  EXPECT_EQ(post(d.port(), "/v1/release", slot_body("tenant", id)).status, 404) << "once";
  EXPECT_EQ(post(d.port(), "/v1/renew", slot_body("tenant", id)).status, 404);
  EXPECT_EQ(post(d.port(), "/v1/acquire", acquire).status, 200) << "the released slot is free";

  const auto metrics = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find(R"(sluice_slots_acquired_total{policy="reports"} 4)"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(sluice_slots_refused_total{policy="reports"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find(R"(sluice_slots_released_total{policy="reports"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find(R"(sluice_slots_renew_failures_total{policy="reports"} 1)"),
            std::string::npos);
  EXPECT_NE(metrics.find(R"(sluice_slots_in_flight{policy="reports"} 2)"), std::string::npos);
}

TEST(DaemonSlotsTest, TheWrongKindOfPolicyAndBadBodiesAreProblems) {
  sluiced_process d(policies);
  auto error_of = [](const http_reply& r) { return json::parse(r.body).value("error", ""); };
  auto r = post(d.port(), "/v1/acquire", R"({"key":"k","policy":"api"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "rate_policy");
  r = post_check(d.port(), R"({"key":"k","policy":"reports"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "concurrency_policy");
  r = post(d.port(), "/v1/acquire", R"({"key":"k","policy":"nope"})");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(error_of(r), "unknown_policy");
  r = post(d.port(), "/v1/release", R"({"key":"k","policy":"reports","slot":"12"})");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(error_of(r), "invalid_slot");
  r = post(d.port(), "/v1/release", R"({"key":"k","policy":"reports"})");
  EXPECT_EQ(r.status, 400);
  r = post(d.port(), "/v1/acquire", R"({"key":"k","policy":"reports","slot":"x"})");
  EXPECT_EQ(r.status, 400) << "acquire takes no slot";
  r = post(d.port(), "/v1/acquire", R"({"key":"k","key":"j","policy":"reports"})");
  EXPECT_EQ(r.status, 400) << "a member given twice";
  r = post(d.port(), "/v1/acquire", R"({"key":"","policy":"reports"})");
  EXPECT_EQ(r.status, 422);
  r = http_request(d.port(), "GET", "/v1/acquire");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "POST");
}

TEST(DaemonSlotsTest, ASlotNobodyReleasesIsFreeWhenItsLeaseEnds) {
  sluiced_process d(policies);
  const std::string acquire = R"({"key":"k","policy":"reports"})";
  ASSERT_EQ(post(d.port(), "/v1/acquire", acquire).status, 200);
  ASSERT_EQ(post(d.port(), "/v1/acquire", acquire).status, 200);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(post(d.port(), "/v1/acquire", acquire).status, 429);
  int status = 429;
  while (status == 429 && std::chrono::steady_clock::now() - start < 400ms + 500ms) {
    std::this_thread::sleep_for(10ms);
    status = post(d.port(), "/v1/acquire", acquire).status;
  }
  EXPECT_EQ(status, 200) << "the 400 ms leases ended";
}

TEST(DaemonSlotsTest, TwoDaemonsOnOneRedisShareTheLimit) {
  redis_server redis;
  const std::string yaml = "backend: " + redis.url() + "\nbackend_timeout_ms: 2000\n" + policies;
  sluiced_process d1(yaml), d2(yaml);
  const std::string acquire = R"({"key":"fleet","policy":"reports"})";
  const auto a = post(d1.port(), "/v1/acquire", acquire);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(json::parse(a.body)["degraded"], false);
  ASSERT_EQ(post(d2.port(), "/v1/acquire", acquire).status, 200);
  EXPECT_EQ(post(d1.port(), "/v1/acquire", acquire).status, 429);
  EXPECT_EQ(post(d2.port(), "/v1/acquire", acquire).status, 429);
  // Released through the other daemon: the slot lives in Redis, not in a daemon.
  const std::string id = json::parse(a.body)["slot"];
  EXPECT_EQ(post(d2.port(), "/v1/renew", slot_body("fleet", id)).status, 200);
  EXPECT_EQ(post(d2.port(), "/v1/release", slot_body("fleet", id)).status, 200);
  EXPECT_EQ(post(d1.port(), "/v1/acquire", acquire).status, 200);
}

TEST(DaemonSlotsTest, ConcurrentCallersThroughTwoDaemonsNeverHoldMoreThanTheLimit) {
  redis_server redis;
  // A lease far longer than the run: only releases free slots, so the callers' count is exact.
  const std::string yaml = "backend: " + redis.url() + "\nbackend_timeout_ms: 2000\n" + policies +
                           "  long: {algorithm: concurrency, limit: 2, lease_ttl: 60s}\n";
  sluiced_process d1(yaml), d2(yaml);
  const std::string acquire = R"({"key":"shared","policy":"long"})";
  std::atomic<int> in_flight{0}, most{0}, held{0}, refused{0}, other{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 16; ++t) {
    callers.emplace_back([&, t] {
      std::minstd_rand rng(static_cast<unsigned>(t));
      http_connection via_a(t % 2 ? d1.port() : d2.port()), via_b(t % 2 ? d2.port() : d1.port());
      const header_list json{{"Content-Type", "application/json"}};
      for (int i = 0; i < 40; ++i) {
        const auto r = via_a.request("POST", "/v1/acquire", acquire, json);
        if (r.status == 429) {
          refused.fetch_add(1);
          continue;
        }
        if (r.status != 200) {
          other.fetch_add(1);
          continue;
        }
        held.fetch_add(1);
        const int now = in_flight.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));  // the work
        in_flight.fetch_sub(1);
        // Released through the other daemon: the slot is Redis's, not a daemon's.
        const std::string id = json::parse(r.body)["slot"];
        const auto release = R"({"key":"shared","policy":"long","slot":")" + id + "\"}";
        if (via_b.request("POST", "/v1/release", release, json).status != 200) other.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_LE(most.load(), 2) << "the limit of policy long";
  EXPECT_GT(held.load(), 0);
  EXPECT_GT(refused.load(), 0) << "the limit was reached";
}

}  // namespace
}  // namespace sluice::test
