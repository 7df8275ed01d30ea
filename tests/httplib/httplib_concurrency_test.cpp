// The cpp-httplib adapter with a rule set's concurrency rule, on a real httplib::Server on
// loopback: a request in its handler holds the rule's slot; the next one is answered with
// the configured status and Retry-After; the slot comes back once the response is written,
// and rate rules of the same set still apply.
#include <sluice/http/httplib.hpp>
#include <sluice/sluice.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace {

namespace sh = sluice::http;
using namespace std::chrono_literals;

// The handler of /reports/ blocks until open() is called: a request "in flight".
struct gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int inside = 0;
  void wait() {
    std::unique_lock lock(mu);
    ++inside;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
  bool wait_inside(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return inside >= n; });
  }
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

struct server {
  httplib::Server http;
  int port = 0;
  std::thread thread;
  std::shared_ptr<sh::cpp_httplib::held_passes> held;

  server(std::shared_ptr<const sh::rule_set> rules, unsigned concurrency_status, gate& g) {
    held = sh::cpp_httplib::install(
        http, sluice::limiter::in_memory(), [rules] { return rules; }, 429, concurrency_status);
    http.Get("/reports/x", [&g](const httplib::Request&, httplib::Response& res) {
      g.wait();
      res.set_content("report", "text/plain");
    });
    http.Get("/other", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("other", "text/plain");
    });
    port = http.bind_to_any_port("127.0.0.1");
    // Bound and listening already: a client connecting before the thread accepts waits.
    thread = std::thread([this] { http.listen_after_bind(); });
  }
  ~server() {
    http.stop();
    thread.join();
  }
};

std::shared_ptr<const sh::rule_set> rules_with_reports(std::uint64_t limit) {
  auto make = [](std::string name, std::string prefix, std::string policy) {
    sh::rule r;
    r.name = std::move(name);
    r.match.path_prefix = std::move(prefix);
    r.key = *sh::key_spec::parse("ip");
    r.policy = std::move(policy);
    return r;
  };
  const auto reports = make("reports", "/reports/", "reports");
  const auto other = make("other", "/other", "api");
  return std::make_shared<const sh::rule_set>(
      std::map<std::string, sluice::policy, std::less<>>{
          {"api", {.capacity = 2, .refill_per_second = 0.001}}},
      std::map<std::string, sluice::concurrency_policy, std::less<>>{
          {"reports", {.limit = limit, .lease_ttl = std::chrono::minutes{10}}}},
      std::vector<sh::rule>{reports, other});
}

TEST(HttplibConcurrencyTest, ASecondRequestInFlightIsRefusedUntilTheFirstIsAnswered) {
  gate g;
  server s(rules_with_reports(1), 503, g);
  auto first = std::async(std::launch::async, [&] {
    httplib::Client c("127.0.0.1", s.port);
    return c.Get("/reports/x");
  });
  ASSERT_TRUE(g.wait_inside(1));
  EXPECT_EQ(s.held->size(), 1u) << "the request in its handler holds the slot";

  httplib::Client c("127.0.0.1", s.port);
  auto refused = c.Get("/reports/x");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << "the configured status";
  EXPECT_TRUE(refused->has_header("Retry-After"));
  EXPECT_GE(std::stoi(refused->get_header_value("Retry-After")), 1);
  EXPECT_EQ(refused->get_header_value("Content-Type"), "application/problem+json");

  g.release();
  auto answered = first.get();
  ASSERT_TRUE(answered);
  EXPECT_EQ(answered->status, 200);
  EXPECT_EQ(answered->body, "report");
  // Given back by the logger, after the response was written (the client has read it).
  for (int i = 0; i < 2000 && s.held->size() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(s.held->size(), 0u);

  auto again = c.Get("/reports/x");  // the gate is open now: answered at once
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << "the slot was given back";
}

TEST(HttplibConcurrencyTest, RateRulesOfTheSameSetStillApplyAndHoldNoSlot) {
  gate g;
  g.release();
  server s(rules_with_reports(1), 429, g);
  httplib::Client c("127.0.0.1", s.port);
  EXPECT_EQ(c.Get("/other")->status, 200);
  EXPECT_EQ(c.Get("/other")->status, 200);
  auto denied = c.Get("/other");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 429) << "capacity 2";
  EXPECT_EQ(s.held->size(), 0u);
  auto first = c.Get("/reports/x");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  // The slot comes back in the logger, after the response is written: the client may read
  // the response (and, on a new connection, be served by another server thread) before that.
  for (int i = 0; i < 2000 && s.held->size() != 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(s.held->size(), 0u);
  auto second = c.Get("/reports/x");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200) << "a request after the first was answered holds the slot again";
}

}  // namespace
