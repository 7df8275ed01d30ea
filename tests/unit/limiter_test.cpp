// sluice::limiter: input validation, failure modes and the async contract.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <sluice/sluice.hpp>

#include "support/destruction_probe.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;

policy bucket(std::uint64_t capacity, double rate, failure_mode mode = failure_mode::open) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = rate;
  p.on_failure = mode;
  return p;
}

// A backend that always fails the way a dead Redis does. The limiter's failure modes are
// pure logic on top of any backend; the real Redis outages are in tests/integration.
class failing_backend final : public backend {
 public:
  explicit failing_backend(errc e) : ec_(e) {}
  int calls = 0;
  std::error_code decide(std::string_view, const policy&, std::uint64_t, decision&) override {
    ++calls;
    return ec_;
  }
  void async_decide(std::string_view, const policy&, std::uint64_t, decide_handler h) override {
    ++calls;
    h(ec_, {});
  }
  std::error_code operate(std::string_view, const policy&, key_operation, std::uint64_t,
                          decision&) override {
    ++calls;
    return ec_;
  }

 private:
  errc ec_;
};

TEST(LimiterTest, RejectsInvalidInputBeforeTheBackend) {
  auto fb = std::make_shared<failing_backend>(errc::backend_unavailable);
  limiter lim(fb);
  const auto p = bucket(10, 1);
  auto expect = [&](std::string_view key, const policy& pol, std::uint64_t cost, errc want) {
    std::error_code ec;
    lim.check(key, pol, cost, ec);
    EXPECT_EQ(ec, want) << "key=" << key << " cost=" << cost;
    EXPECT_TRUE(is_invalid_input(ec));
  };
  expect("", p, 1, errc::empty_key);
  expect(std::string(max_key_size + 1, 'k'), p, 1, errc::key_too_long);
  expect("k", p, 0, errc::invalid_cost);
  expect("k", p, 11, errc::cost_exceeds_capacity);
  expect("k", bucket(0, 1), 1, errc::invalid_capacity);
  expect("k", bucket(max_capacity + 1, 1), 1, errc::invalid_capacity);
  expect("k", bucket(10, 0), 1, errc::invalid_refill_rate);
  expect("k", bucket(10, -1), 1, errc::invalid_refill_rate);
  expect("k", bucket(10, 0.0004), 1, errc::invalid_refill_rate);
  expect("k", bucket(10, std::numeric_limits<double>::quiet_NaN()), 1, errc::invalid_refill_rate);
  expect("k", bucket(10, std::numeric_limits<double>::infinity()), 1, errc::invalid_refill_rate);
  expect("k", bucket(10, 2e9), 1, errc::invalid_refill_rate);
  EXPECT_EQ(fb->calls, 0);
  EXPECT_EQ(lim.stats().invalid, 12u);
  EXPECT_THROW(lim.check("", p), std::system_error);
}

TEST(LimiterTest, AcceptsTheBoundaries) {
  auto lim = limiter::in_memory();
  std::error_code ec;
  lim.check(std::string(max_key_size, 'k'), bucket(max_capacity, max_refill_per_second),
            max_capacity, ec);
  EXPECT_FALSE(ec);
  lim.check("k", bucket(1, min_refill_per_second), 1, ec);
  EXPECT_FALSE(ec);
}

TEST(LimiterTest, FailOpenAllowsAndMarksDegraded) {
  limiter lim(std::make_shared<failing_backend>(errc::backend_timeout));
  const auto d = lim.check("k", bucket(10, 1, failure_mode::open), 3);
  EXPECT_TRUE(d.allowed);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(d.backend_error, errc::backend_timeout);
  EXPECT_EQ(d.limit, 10u);
  EXPECT_EQ(d.remaining, 7u);
  // As if the bucket were full and spent 3: full again after 3 tokens at 1/s.
  EXPECT_EQ(d.reset_after, milliseconds{3000});
  EXPECT_EQ(lim.stats().degraded_open, 1u);
  EXPECT_EQ(lim.stats().backend_errors, 1u);
}

TEST(LimiterTest, FailClosedDeniesWithARetryTimeAndMarksDegraded) {
  limiter lim(std::make_shared<failing_backend>(errc::backend_unavailable));
  const auto d = lim.check("k", bucket(10, 2, failure_mode::closed), 3);
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(d.retry_after, milliseconds{1500});  // 3 tokens at 2/s
  EXPECT_EQ(d.reset_after, milliseconds{5000});
  EXPECT_EQ(lim.stats().degraded_closed, 1u);
}

TEST(LimiterTest, FailLocalDecidesWithTheMemoryFallback) {
  auto clock = std::make_shared<manual_clock>();
  auto local = make_memory_backend({.time_source = clock});
  limiter lim(std::make_shared<failing_backend>(errc::backend_unavailable), local);
  const auto p = bucket(2, 1, failure_mode::local);
  auto d = lim.check("k", p);
  EXPECT_TRUE(d.allowed && d.degraded);
  EXPECT_EQ(d.remaining, 1u);
  EXPECT_TRUE(lim.check("k", p).allowed);
  d = lim.check("k", p);
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(d.retry_after, milliseconds{1000});
  EXPECT_EQ(lim.stats().degraded_local, 3u);
}

TEST(LimiterTest, HealthyDecisionsAreCounted) {
  auto lim = limiter::in_memory();
  const auto p = bucket(1, 1);
  EXPECT_FALSE(lim.check("k", p).degraded);
  lim.check("k", p);
  EXPECT_EQ(lim.stats().allowed, 1u);
  EXPECT_EQ(lim.stats().denied, 1u);
  EXPECT_EQ(lim.stats().backend_errors, 0u);
}

// limiter is a handle (limiter.hpp): a copy decides from the same buckets and counts in
// the same stats, and outlives the original; a limiter made anew does not share them.
TEST(LimiterTest, CopiesShareBucketsAndStats) {
  const auto p = bucket(2, 0.001);
  auto copy = std::make_unique<limiter>(limiter::in_memory());
  limiter original = *copy;
  EXPECT_TRUE(original.check("k", p).allowed);
  EXPECT_TRUE(copy->check("k", p).allowed);
  EXPECT_FALSE(original.check("k", p).allowed);
  EXPECT_EQ(copy->stats().allowed, 2u);
  EXPECT_EQ(copy->stats().denied, 1u);
  limiter survivor = *copy;
  copy.reset();
  EXPECT_FALSE(survivor.check("k", p).allowed);
  EXPECT_EQ(original.stats().denied, 2u);
  EXPECT_TRUE(limiter::in_memory().check("k", p).allowed);
}

TEST(LimiterTest, AsyncHandlerNeverRunsInlineAndRunsOnItsExecutor) {
  boost::asio::io_context io;
  auto lim = limiter::in_memory();
  bool done = false;
  lim.async_check("k", bucket(1, 1), 1,
                  boost::asio::bind_executor(io, [&](std::error_code ec, decision d) {
                    EXPECT_FALSE(ec);
                    EXPECT_TRUE(d.allowed);
                    done = true;
                  }));
  EXPECT_FALSE(done);  // the memory backend decided at once, yet the handler waits for io
  io.run();
  EXPECT_TRUE(done);
}

// A backend that answers at once, then holds the call until `released` (at most 5 s): the
// completion may run, and be done with, on the io_context's thread while the initiating
// call has not returned yet.
class answers_then_holds final : public backend {
 public:
  explicit answers_then_holds(const std::atomic<int>& released) : released_(released) {}
  std::error_code decide(std::string_view, const policy&, std::uint64_t, decision& d) override {
    d.allowed = true;
    return {};
  }
  void async_decide(std::string_view, const policy&, std::uint64_t, decide_handler h) override {
    decision d;
    d.allowed = true;
    h({}, d);
    hold();
  }
  std::error_code operate(std::string_view, const policy&, key_operation, std::uint64_t,
                          decision&) override {
    return {};
  }
  void async_slot(std::string_view, const slot_request& request, slot_handler h) override {
    slot_reply r;
    r.held = true;
    r.in_flight = 1;
    r.expires_in = std::chrono::seconds(30);
    h({}, r);
    // Only the acquire is held: the slot's release runs inside the handler.
    if (request.op == slot_operation::acquire) hold();
  }

 private:
  void hold() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (released_ == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const std::atomic<int>& released_;
};

// A handler may own what must go on its own thread (a connection's buffers, a strand's
// state): it is destroyed where it ran, not by the initiating call returning later. Every
// async form that takes a completion token.
TEST(LimiterTest, AsyncHandlerIsDestroyedOnTheThreadThatRanIt) {
  const sluice::concurrency_policy slots{.limit = 1, .lease_ttl = std::chrono::seconds(30)};
  for (const std::string form :
       {"async_check", "async_check_all", "async_try_acquire", "async_acquire"}) {
    test::destruction_record record;
    limiter lim(std::make_shared<answers_then_holds>(record.destroyed));
    boost::asio::io_context io;
    auto work = boost::asio::make_work_guard(io);
    std::thread runner([&] { io.run(); });
    record.home = runner.get_id();
    bool ran = false;
    auto handler = boost::asio::bind_executor(io, [&ran, probe = test::destruction_probe(&record)](
                                                      std::error_code, auto) { ran = true; });
    if (form == "async_check") {
      lim.async_check("k", bucket(1, 1), 1, std::move(handler));
    } else if (form == "async_check_all") {
      lim.async_check_all(std::vector<check_item>{{"k", bucket(1, 1), 1}}, std::move(handler));
    } else if (form == "async_try_acquire") {
      lim.async_try_acquire("k", slots, std::move(handler));
    } else {
      lim.async_acquire("k", slots, std::chrono::seconds(1), std::move(handler));
    }
    work.reset();
    runner.join();
    EXPECT_TRUE(ran) << form;
    EXPECT_EQ(record.destroyed, 1) << form;
    EXPECT_EQ(record.elsewhere, 0) << form;
  }
}

TEST(LimiterTest, OnBackendThreadRunsWhereTheBackendDecides) {
  // The memory backend decides at once, so the handler has run before the call returns.
  auto lim = limiter::in_memory();
  std::vector<decision> seen;
  for (int i = 0; i < 2; ++i) {
    lim.async_check(on_backend_thread, "k", bucket(1, 0.001), 1,
                    [&](std::error_code ec, decision d) {
                      EXPECT_FALSE(ec);
                      seen.push_back(d);
                    });
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].allowed);
  EXPECT_FALSE(seen[1].allowed);
  bool bad = false;
  lim.async_check(on_backend_thread, "", bucket(1, 1), 1,
                  [&](std::error_code ec, decision) { bad = ec == errc::empty_key; });
  EXPECT_TRUE(bad);
  std::vector<decision> all;
  lim.async_check_all(on_backend_thread,
                      std::vector<check_item>{{"k", bucket(1, 0.001), 1}, {"j", bucket(5, 1), 1}},
                      [&](std::error_code ec, std::vector<decision> ds) {
                        EXPECT_FALSE(ec);
                        all = std::move(ds);
                      });
  ASSERT_EQ(all.size(), 2u);
  EXPECT_FALSE(all[0].allowed);  // "k" is spent: the pair is denied, and "j" keeps its 5
  EXPECT_EQ(lim.check("j", bucket(5, 1)).remaining, 4u);
}

TEST(LimiterTest, AsyncReportsInvalidInputAndAppliesFailureModes) {
  limiter lim(std::make_shared<failing_backend>(errc::backend_timeout));
  // std::error_code is not Asio's error type, so use_future yields (ec, decision).
  auto bad = lim.async_check("", bucket(1, 1), 1, boost::asio::use_future).get();
  EXPECT_EQ(std::get<0>(bad), errc::empty_key);
  auto [ec, d] =
      lim.async_check("k", bucket(1, 1, failure_mode::closed), 1, boost::asio::use_future).get();
  EXPECT_FALSE(ec);
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.degraded);
}

// Every key operation has an async form on the one path: the same answers as the blocking
// forms, handlers never inline and on their own executor, input errors before the backend.
TEST(LimiterTest, AsyncKeyOperationsAnswerAsTheBlockingOnes) {
  auto clock = std::make_shared<manual_clock>();
  auto mem = make_memory_backend({.time_source = clock});
  limiter lim(mem, mem);
  const auto p = bucket(10, 1);
  boost::asio::io_context io;
  std::vector<std::pair<std::error_code, decision>> seen;
  auto record = [&](std::error_code ec, decision d) { seen.emplace_back(ec, d); };
  lim.check("k", p, 6);  // 4 left
  lim.async_peek("k", p, 5, boost::asio::bind_executor(io, record));
  lim.async_refund("k", p, 3, boost::asio::bind_executor(io, record));
  lim.async_penalize("k", p, 2, boost::asio::bind_executor(io, record));
  lim.async_block("k", p, milliseconds{1500}, boost::asio::bind_executor(io, record));
  lim.async_reset("j", p, boost::asio::bind_executor(io, record));
  lim.async_refund("k", p, 11, boost::asio::bind_executor(io, record));  // over the capacity
  EXPECT_TRUE(seen.empty());  // decided inline, answered on io
  io.run();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_FALSE(seen[0].first);
  EXPECT_FALSE(seen[0].second.allowed);  // 5 of 4: the peek denies and spends nothing
  EXPECT_EQ(seen[0].second.remaining, 4u);
  EXPECT_EQ(seen[1].second.remaining, 7u);  // refund 3
  EXPECT_EQ(seen[2].second.remaining, 5u);  // penalize 2
  EXPECT_FALSE(seen[3].second.allowed);     // blocked
  EXPECT_EQ(seen[3].second.retry_after, milliseconds{1500});
  EXPECT_FALSE(seen[4].first);
  EXPECT_EQ(seen[4].second.remaining, 10u);
  EXPECT_EQ(seen[5].first, errc::cost_exceeds_capacity);
  // The block holds for the blocking form too, and a reset ends it.
  EXPECT_FALSE(lim.check("k", p).allowed);
  auto [ec, d] = lim.async_reset("k", p, boost::asio::use_future).get();
  EXPECT_FALSE(ec);
  EXPECT_EQ(d.remaining, 10u);
  EXPECT_TRUE(lim.check("k", p).allowed);
  auto bad = lim.async_block("k", p, milliseconds{0}, boost::asio::use_future).get();
  EXPECT_EQ(std::get<0>(bad), errc::invalid_duration);
}

TEST(LimiterTest, AsyncOperationsOnAFailingBackend) {
  auto fb = std::make_shared<failing_backend>(errc::backend_timeout);
  limiter lim(fb);
  // A peek takes the failure mode, marked degraded; an operation reports the error.
  auto [pec, pd] =
      lim.async_peek("k", bucket(5, 1, failure_mode::closed), 1, boost::asio::use_future).get();
  EXPECT_FALSE(pec);
  EXPECT_FALSE(pd.allowed);
  EXPECT_TRUE(pd.degraded);
  EXPECT_EQ(pd.backend_error, errc::backend_timeout);
  auto [oec, od] = lim.async_refund("k", bucket(5, 1), 1, boost::asio::use_future).get();
  EXPECT_EQ(oec, errc::backend_timeout);
  EXPECT_EQ(fb->calls, 2);
  EXPECT_EQ(lim.stats().backend_errors, 2u);
  // On the backend's thread: inline here, with the same answers.
  std::error_code seen;
  lim.async_operate(on_backend_thread, "k", bucket(5, 1), key_operation::reset, 0,
                    [&](std::error_code ec, decision) { seen = ec; });
  EXPECT_EQ(seen, errc::backend_timeout);
}

TEST(LimiterTest, FromUrlRejectsUnknownSchemes) {
  EXPECT_THROW(limiter_from_url("http://x"), std::invalid_argument);
  EXPECT_NO_THROW(limiter_from_url("memory"));
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Counts the calls that reach a real memory backend.
class counting_backend final : public backend {
 public:
  explicit counting_backend(std::shared_ptr<backend> inner) : inner_(std::move(inner)) {}
  int calls = 0;
  std::error_code decide(std::string_view k, const policy& p, std::uint64_t c,
                         decision& d) override {
    ++calls;
    return inner_->decide(k, p, c, d);
  }
  void async_decide(std::string_view k, const policy& p, std::uint64_t c,
                    decide_handler h) override {
    ++calls;
    inner_->async_decide(k, p, c, std::move(h));
  }

 private:
  std::shared_ptr<backend> inner_;
};

class DenyCacheTest : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<counting_backend> counted_ =
      std::make_shared<counting_backend>(make_memory_backend({.time_source = clock_}));
  limiter lim_{counted_, nullptr, clock_};
  policy p_ = [] {
    policy p = bucket(2, 1);
    p.cache_denials = true;
    return p;
  }();
};

TEST_F(DenyCacheTest, RepeatedDenialsStayLocalUntilTheRetryTime) {
  lim_.check("k", p_);
  lim_.check("k", p_);
  auto d = lim_.check("k", p_);  // denied by the backend: 1000 ms to the next token
  ASSERT_FALSE(d.allowed);
  EXPECT_EQ(counted_->calls, 3);
  clock_->advance(milliseconds{400});
  d = lim_.check("k", p_);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, milliseconds{600});
  EXPECT_EQ(counted_->calls, 3);  // no round trip
  EXPECT_EQ(lim_.stats().cached_denials, 1u);
  clock_->advance(milliseconds{600});
  EXPECT_TRUE(lim_.check("k", p_).allowed);  // the backend decides again, and admits
  EXPECT_EQ(counted_->calls, 4);
}

TEST_F(DenyCacheTest, NeverDeniesWhatTheBackendMightAdmit) {
  lim_.check("k", p_, 2);
  ASSERT_FALSE(lim_.check("k", p_, 2).allowed);  // needs 2 tokens: 2000 ms
  clock_->advance(milliseconds{1000});
  // One token exists now: a cost-1 request must reach the backend, and is admitted.
  EXPECT_TRUE(lim_.check("k", p_, 1).allowed);
  // Another policy on the same key is not answered from this policy's denial.
  policy other = p_;
  other.capacity = 5;
  lim_.check("k", other, 1);
  EXPECT_EQ(counted_->calls, 4);
}

TEST_F(DenyCacheTest, OffUnlessThePolicyAsks) {
  policy plain = p_;
  plain.cache_denials = false;
  for (int i = 0; i < 5; ++i) lim_.check("k", plain);
  EXPECT_EQ(counted_->calls, 5);
  EXPECT_EQ(lim_.stats().cached_denials, 0u);
}

TEST_F(DenyCacheTest, AsyncChecksUseTheCacheToo) {
  lim_.check("k", p_);
  lim_.check("k", p_);
  lim_.check("k", p_);
  auto [ec, d] = lim_.async_check("k", p_, 1, boost::asio::use_future).get();
  EXPECT_FALSE(ec);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(counted_->calls, 3);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST(LimiterCheckAllTest, ValidatesEveryItemBeforeTheBackend) {
  auto fb = std::make_shared<failing_backend>(errc::backend_unavailable);
  limiter lim(fb);
  const auto p = bucket(10, 1);
  std::error_code ec;
  auto ds = lim.check_all(std::vector<check_item>{{"a", p, 1}, {"b", p, 11}}, ec);
  EXPECT_EQ(ec, errc::cost_exceeds_capacity);
  EXPECT_TRUE(ds.empty());
  ds = lim.check_all(std::vector<check_item>{{"", p, 1}, {"b", p, 1}}, ec);
  EXPECT_EQ(ec, errc::empty_key);
  EXPECT_EQ(fb->calls, 0);
  EXPECT_EQ(lim.stats().invalid, 2u);
  EXPECT_THROW(lim.check_all(std::vector<check_item>{{"k", bucket(0, 1), 1}}), std::system_error);
  ds = lim.check_all({}, ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(ds.empty());
  EXPECT_EQ(fb->calls, 0);
}

TEST(LimiterCheckAllTest, AllOrNothingOnTheMemoryBackend) {
  auto clock = std::make_shared<manual_clock>();
  auto mem = make_memory_backend({.time_source = clock});
  limiter lim(mem, mem);
  const auto a = bucket(5, 1), b = bucket(1, 1);
  auto ds = lim.check_all(std::vector<check_item>{{"a", a, 1}, {"b", b, 1}});
  EXPECT_TRUE(all_allowed(ds));
  ds = lim.check_all(std::vector<check_item>{{"a", a, 1}, {"b", b, 1}});
  EXPECT_FALSE(all_allowed(ds));
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_EQ(ds[0].remaining, 4u);  // not spent
  EXPECT_EQ(ds[1].retry_after, milliseconds{1000});
  EXPECT_EQ(lim.check("a", a).remaining, 3u);
  const auto s = lim.stats();
  EXPECT_EQ(s.allowed, 4u);  // per item: a, b, a (not spent), then the single check of a
  EXPECT_EQ(s.denied, 1u);
}

// Calls far larger than a request's handful of rules (one ShouldRateLimit may carry
// hundreds of descriptors): items on one key still share it exactly, and two algorithms on
// one key are still refused, however far apart the items are.
TEST(LimiterCheckAllTest, LargeCallsShareKeysExactly) {
  auto clock = std::make_shared<manual_clock>();
  auto mem = make_memory_backend({.time_source = clock});
  limiter lim(mem, mem);
  const auto p = bucket(10, 1);
  std::vector<std::string> keys;
  for (int k = 0; k < 100; ++k) keys.push_back("key:" + std::to_string(k));
  std::vector<check_item> items;
  for (int round = 0; round < 10; ++round) {
    for (const auto& k : keys) items.push_back({k, p, 1});
  }
  auto ds = lim.check_all(items);
  ASSERT_EQ(ds.size(), 1000u);
  EXPECT_TRUE(all_allowed(ds));
  EXPECT_EQ(ds[0].remaining, 9u);    // the first item on key:0
  EXPECT_EQ(ds[999].remaining, 0u);  // the tenth on key:99
  // One more on any key denies the whole call, and nothing is spent.
  items.push_back({"fresh", p, 1});
  items.push_back({"key:50", p, 1});
  ds = lim.check_all(items);
  EXPECT_FALSE(all_allowed(ds));
  EXPECT_EQ(lim.peek("fresh", p).remaining, 10u);

  std::vector<check_item> mixed(items.begin(), items.begin() + 900);
  policy other = bucket(10, 1);
  other.algorithm = algorithm::gcra;
  mixed.push_back({"key:7", other, 1});
  std::error_code ec;
  EXPECT_TRUE(lim.check_all(mixed, ec).empty());
  EXPECT_EQ(ec, errc::mismatched_parameters);
}

TEST(LimiterCheckAllTest, FailureModesPerItem) {
  limiter lim(std::make_shared<failing_backend>(errc::backend_timeout));
  auto ds = lim.check_all(std::vector<check_item>{{"o", bucket(10, 1, failure_mode::open), 2},
                                                  {"c", bucket(10, 2, failure_mode::closed), 3}});
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_EQ(ds[0].remaining, 8u);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].retry_after, milliseconds{1500});
  for (const auto& d : ds) {
    EXPECT_TRUE(d.degraded);
    EXPECT_EQ(d.backend_error, errc::backend_timeout);
  }
  const auto s = lim.stats();
  EXPECT_EQ(s.backend_errors, 1u);  // one failed call
  EXPECT_EQ(s.degraded_open, 1u);
  EXPECT_EQ(s.degraded_closed, 1u);
}

TEST(LimiterCheckAllTest, LocalItemsAreAllOrNothingInTheFallback) {
  auto clock = std::make_shared<manual_clock>();
  auto local = make_memory_backend({.time_source = clock});
  limiter lim(std::make_shared<failing_backend>(errc::backend_unavailable), local);
  const auto big = bucket(5, 1, failure_mode::local), small = bucket(1, 1, failure_mode::local);
  EXPECT_TRUE(all_allowed(lim.check_all(std::vector<check_item>{{"a", big, 1}, {"b", small, 1}})));
  auto ds = lim.check_all(std::vector<check_item>{{"a", big, 1}, {"b", small, 1}});
  EXPECT_FALSE(all_allowed(ds));
  EXPECT_TRUE(ds[0].degraded && ds[1].degraded);
  // The fallback spent nothing from "a" for the denied call.
  decision d;
  ASSERT_FALSE(local->decide("a", big, 4, d));
  EXPECT_TRUE(d.allowed);
  // A closed item denies the call, so the local items are not decided (nothing spent).
  ds = lim.check_all(
      std::vector<check_item>{{"fresh", big, 5}, {"c", bucket(1, 1, failure_mode::closed), 1}});
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  ASSERT_FALSE(local->decide("fresh", big, 5, d));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(lim.stats().degraded_local, 5u);
}

TEST(LimiterCheckAllTest, AsyncHandlerNeverRunsInlineAndMatchesTheBlockingCall) {
  boost::asio::io_context io;
  auto lim = limiter::in_memory();
  const auto a = bucket(2, 1), b = bucket(1, 1);
  bool done = false;
  std::string key = "a";  // copied before async_check_all returns
  const std::vector<check_item> items{{key, a, 1}, {"b", b, 1}};
  lim.async_check_all(
      items, boost::asio::bind_executor(io, [&](std::error_code ec, std::vector<decision> ds) {
        EXPECT_FALSE(ec);
        EXPECT_TRUE(all_allowed(ds));
        done = true;
      }));
  key = "changed";
  EXPECT_FALSE(done);
  io.run();
  EXPECT_TRUE(done);
  // A promise rather than use_future: GCC 12 at -O1 (the sanitizer presets) warns inside
  // Boost's use_future for this signature (-Wmaybe-uninitialized, a false positive).
  auto run = [&](std::vector<check_item> items) {
    std::promise<std::pair<std::error_code, std::vector<decision>>> p;
    lim.async_check_all(items, [&p](std::error_code ec, std::vector<decision> ds) {
      p.set_value({ec, std::move(ds)});
    });
    return p.get_future().get();
  };
  auto [ec, ds] = run({{"a", a, 1}, {"b", b, 1}});
  EXPECT_FALSE(ec);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(lim.check("a", a).remaining, 0u);  // "a" had 1 left: the denied call kept it
  EXPECT_EQ(run({{"a", a, 3}}).first, errc::cost_exceeds_capacity);
}

TEST_F(DenyCacheTest, CheckAllIsAnsweredFromACachedDenialWithoutARoundTrip) {
  lim_.check("k", p_);
  lim_.check("k", p_);
  ASSERT_FALSE(lim_.check("k", p_).allowed);  // cached now
  const auto other = bucket(10, 1);
  const int calls = counted_->calls;
  const auto ds = lim_.check_all(std::vector<check_item>{{"other", other, 1}, {"k", p_, 1}});
  EXPECT_EQ(counted_->calls, calls);
  EXPECT_FALSE(all_allowed(ds));
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_EQ(ds[0].remaining, 9u);  // not looked at: reported as if full
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].retry_after, milliseconds{1000});
  EXPECT_EQ(lim_.stats().cached_denials, 1u);
  // "other" spent nothing.
  EXPECT_EQ(lim_.check("other", other, 10).remaining, 0u);
}

// A valid_policy is validated once, when made: an invalid one cannot be made, and a check
// against one still refuses the per-call input (key, cost) with the same codes.
TEST(ValidPolicyTest, IsValidatedWhenMadeAndChecksOnlyTheCallAfterwards) {
  std::error_code ec;
  EXPECT_FALSE(valid_policy::make(policy{.capacity = 0, .refill_per_second = 1}, ec));
  EXPECT_EQ(ec, errc::invalid_capacity);
  try {
    valid_policy bad(policy{.capacity = 5, .refill_per_second = 0});
    ADD_FAILURE() << "an invalid policy was accepted";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::invalid_refill_rate);
  }

  const policy p{.capacity = 2, .refill_per_second = 0.001};
  const auto vp = valid_policy::make(p, ec);
  ASSERT_TRUE(vp) << ec.message();
  auto lim = limiter::in_memory();
  lim.check("", *vp, 1, ec);
  EXPECT_EQ(ec, errc::empty_key);
  lim.check("k", *vp, 3, ec);
  EXPECT_EQ(ec, errc::cost_exceeds_capacity);
  lim.check("k", *vp, 0, ec);
  EXPECT_EQ(ec, errc::invalid_cost);
  EXPECT_EQ(lim.stats().invalid, 3u);
  EXPECT_THROW(lim.check(std::string(max_key_size + 1, 'k'), *vp), std::system_error);

  // The same decisions as the plain policy's, on the same bucket.
  EXPECT_TRUE(lim.check("k", *vp).allowed);
  EXPECT_TRUE(lim.check("k", p).allowed);
  EXPECT_FALSE(lim.check("k", *vp).allowed);
  std::promise<decision> got;
  lim.async_check(on_backend_thread, "k", *vp, 1, [&](std::error_code e, decision d) {
    EXPECT_FALSE(e);
    got.set_value(d);
  });
  EXPECT_FALSE(got.get_future().get().allowed);
  auto [aec, ad] = lim.async_check("k", *vp, 1, boost::asio::use_future).get();
  EXPECT_FALSE(aec);
  EXPECT_FALSE(ad.allowed);
}

}  // namespace
}  // namespace sluice
