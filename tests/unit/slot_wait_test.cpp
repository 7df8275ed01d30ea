// limiter::async_acquire on the memory backend: waiters of a key are served in arrival
// order, a release through the limiter hands its slot to the first waiter at once (no
// timer involved: the io_context is not even running when it happens), a zero max_wait is
// one attempt, and a limiter destroyed with waiters pending completes them. (max_wait's
// timer is tested on Redis: tests/integration/redis_slot_wait_test.cpp.)
// The memory backend answers inline, so everything here happens on the test's thread; the
// io_context only runs the completions when the test polls it.
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/memory_backend.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

namespace sluice {
namespace {

using namespace std::chrono_literals;

// What one waiter's handler got, once it has run.
struct outcome {
  std::optional<std::error_code> ec;
  slot s;
};

auto record(outcome& o) {
  return [&o](std::error_code ec, slot s) {
    o.ec = ec;
    o.s = std::move(s);
  };
}

// Runs the completions that are ready (restarting a context that ran out of work).
void poll(boost::asio::io_context& ctx) {
  ctx.restart();
  ctx.poll();
}

const concurrency_policy one{.limit = 1, .lease_ttl = std::chrono::minutes{10}};

TEST(SlotWaitTest, AReleaseWakesTheWaitersOneByOneInArrivalOrder) {
  boost::asio::io_context ctx;
  auto lim = limiter::in_memory();
  slot holder = lim.try_acquire("k", one);
  ASSERT_TRUE(holder);

  // Each waits ten minutes at most: only a wake-up can serve them within this test.
  std::vector<outcome> got(3);
  for (auto& o : got)
    lim.async_acquire("k", one, 10min, boost::asio::bind_executor(ctx, record(o)));
  poll(ctx);
  for (const auto& o : got) EXPECT_FALSE(o.ec) << "nobody is served while the slot is held";
  const auto before = lim.slot_stats().acquired;

  holder.release();
  // The first waiter's acquire ran inside release(), before any timer could: the io_context
  // has not run since.
  EXPECT_EQ(lim.slot_stats().acquired, before + 1);
  poll(ctx);
  ASSERT_TRUE(got[0].ec);
  EXPECT_FALSE(*got[0].ec);
  EXPECT_TRUE(got[0].s) << "the first to arrive gets the freed slot";
  EXPECT_FALSE(got[1].ec) << "one waiter per freed slot";
  EXPECT_FALSE(got[2].ec);

  got[0].s.release();
  poll(ctx);
  ASSERT_TRUE(got[1].ec);
  EXPECT_TRUE(got[1].s) << "then the second";
  EXPECT_FALSE(got[2].ec);

  got[1].s = slot{};  // assigning over a slot releases it too
  poll(ctx);
  ASSERT_TRUE(got[2].ec);
  EXPECT_TRUE(got[2].s);
}

// The memory backend, except for one acquire asked while `hold_next` is set: its answer
// (late_answer: the step is done at once) or the whole step (late_step) waits until the
// test runs `late`, as a step on its way to Redis or back does.
class late_answers final : public backend {
 public:
  explicit late_answers(std::shared_ptr<backend> inner) : inner_(std::move(inner)) {}
  std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                         decision& d) override {
    return inner_->decide(key, p, cost, d);
  }
  void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                    decide_handler handler) override {
    inner_->async_decide(key, p, cost, std::move(handler));
  }
  void async_slot(std::string_view key, const slot_request& request,
                  slot_handler handler) override {
    if (!hold_next || request.op != slot_operation::acquire) {
      inner_->async_slot(key, request, std::move(handler));
      return;
    }
    hold_next = false;
    if (late_step) {
      late = [this, k = std::string(key), r = request, id = std::string(request.id),
              h = std::move(handler)]() mutable {
        r.id = id;
        inner_->async_slot(k, r, std::move(h));
      };
      return;
    }
    // Asked now (the backend's state as it is now), answered when the test says.
    inner_->async_slot(key, request,
                       [this, h = std::move(handler)](std::error_code ec, slot_reply r) mutable {
                         late = [h = std::move(h), ec, r]() mutable { h(ec, r); };
                       });
  }
  bool hold_next = false;
  bool late_step = false;
  std::function<void()> late;

 private:
  std::shared_ptr<backend> inner_;
};

TEST(SlotWaitTest, AReleaseDuringTheFirstWaitersPollStillServesItFirst) {
  // The first waiter asked, was refused, and its answer is still on the way back when the
  // slot is freed: the release is its own (it asks again at once), not the second's, who
  // would otherwise overtake it.
  boost::asio::io_context ctx;
  auto mem = std::make_shared<late_answers>(make_memory_backend());
  limiter lim(mem, make_memory_backend());
  slot holder = lim.try_acquire("k", one);
  ASSERT_TRUE(holder);
  outcome first, second;
  mem->hold_next = true;
  lim.async_acquire("k", one, 10min, boost::asio::bind_executor(ctx, record(first)));
  ASSERT_TRUE(mem->late) << "the first waiter's attempt is in flight";
  lim.async_acquire("k", one, 10min, boost::asio::bind_executor(ctx, record(second)));

  const auto acquired = lim.slot_stats().acquired;
  holder.release();
  poll(ctx);
  EXPECT_FALSE(second.ec) << "the second waiter took the first one's turn";
  EXPECT_EQ(lim.slot_stats().acquired, acquired) << "the freed slot is still free";

  std::exchange(mem->late, nullptr)();  // the refusal arrives, after the release
  poll(ctx);
  ASSERT_TRUE(first.ec);
  EXPECT_FALSE(*first.ec);
  EXPECT_TRUE(first.s) << "the first waiter asks again at once and gets the freed slot";
  EXPECT_FALSE(second.ec) << "one waiter per freed slot";

  first.s.release();
  poll(ctx);
  ASSERT_TRUE(second.ec);
  EXPECT_TRUE(second.s) << "then the second";
}

TEST(SlotWaitTest, ASecondReleaseWhileAWokenWaitersStepIsOnItsWayDoesNotLetTheNextOvertakeIt) {
  // The first waiter was woken by a release and its acquire has not reached the backend
  // when another slot frees: that release is owed to it too (its step may have been refused
  // had it arrived first), not the second waiter's, who would otherwise be served first.
  boost::asio::io_context ctx;
  auto mem = std::make_shared<late_answers>(make_memory_backend());
  mem->late_step = true;
  limiter lim(mem, make_memory_backend());
  const concurrency_policy two{.limit = 2, .lease_ttl = std::chrono::minutes{10}};
  slot a = lim.try_acquire("k", two);
  slot b = lim.try_acquire("k", two);
  ASSERT_TRUE(a && b);
  outcome first, second;
  lim.async_acquire("k", two, 10min, boost::asio::bind_executor(ctx, record(first)));
  lim.async_acquire("k", two, 10min, boost::asio::bind_executor(ctx, record(second)));
  poll(ctx);
  ASSERT_FALSE(first.ec);

  mem->hold_next = true;
  a.release();  // wakes the first waiter: its step is on its way
  ASSERT_TRUE(mem->late);
  b.release();
  poll(ctx);
  EXPECT_FALSE(second.ec) << "the second waiter was served before the first";

  std::exchange(mem->late, nullptr)();  // the first waiter's step arrives
  poll(ctx);
  ASSERT_TRUE(first.ec);
  EXPECT_TRUE(first.s);
  ASSERT_TRUE(second.ec) << "the wake-up the first did not need was passed on";
  EXPECT_TRUE(second.s);
}

TEST(SlotWaitTest, AReleaseByIdWakesAWaiter) {
  boost::asio::io_context ctx;
  auto lim = limiter::in_memory();
  slot holder = lim.try_acquire("k", one);
  const std::string id = holder.detach();  // as sluiced hands a slot to a client
  outcome o;
  lim.async_acquire("k", one, 10min, boost::asio::bind_executor(ctx, record(o)));
  poll(ctx);
  ASSERT_FALSE(o.ec);

  std::error_code ec;
  EXPECT_TRUE(lim.slot_step("k", one, slot_operation::release, id, ec).held);
  poll(ctx);
  ASSERT_TRUE(o.ec);
  EXPECT_TRUE(o.s);
}

TEST(SlotWaitTest, AWaiterOfAnotherKeyIsNotWoken) {
  boost::asio::io_context ctx;
  auto lim = limiter::in_memory();
  slot a = lim.try_acquire("a", one);
  slot b = lim.try_acquire("b", one);
  outcome waits_for_b;
  lim.async_acquire("b", one, 10min, boost::asio::bind_executor(ctx, record(waits_for_b)));
  const auto before = lim.slot_stats().refused;
  a.release();
  EXPECT_EQ(lim.slot_stats().refused, before) << "no attempt for b: nothing of b was freed";
  poll(ctx);
  EXPECT_FALSE(waits_for_b.ec);
  b.release();
  poll(ctx);
  ASSERT_TRUE(waits_for_b.ec);
  EXPECT_TRUE(waits_for_b.s);
}

TEST(SlotWaitTest, AFreeSlotIsTakenWithoutWaitingAndTheHandlerIsNotRunInline) {
  boost::asio::io_context ctx;
  auto lim = limiter::in_memory();
  outcome o;
  lim.async_acquire("k", one, 10min, boost::asio::bind_executor(ctx, record(o)));
  EXPECT_FALSE(o.ec) << "posted, not run inline";
  poll(ctx);
  ASSERT_TRUE(o.ec);
  EXPECT_TRUE(o.s);
}

TEST(SlotWaitTest, ZeroMaxWaitIsOneAttempt) {
  boost::asio::io_context ctx;
  auto lim = limiter::in_memory();
  slot holder = lim.try_acquire("k", one);
  outcome o;
  lim.async_acquire("k", one, 0ms, boost::asio::bind_executor(ctx, record(o)));
  poll(ctx);
  ASSERT_TRUE(o.ec);
  EXPECT_FALSE(o.s);
}

TEST(SlotWaitTest, InvalidInputIsAnErrorAndNoWait) {
  boost::asio::io_context ctx;
  auto lim = limiter::in_memory();
  outcome o;
  lim.async_acquire("", one, 10min, boost::asio::bind_executor(ctx, record(o)));
  poll(ctx);
  ASSERT_TRUE(o.ec);
  EXPECT_EQ(*o.ec, errc::empty_key);
  concurrency_policy none = one;
  none.limit = 0;
  outcome p;
  lim.async_acquire("k", none, 10min, boost::asio::bind_executor(ctx, record(p)));
  poll(ctx);
  ASSERT_TRUE(p.ec);
  EXPECT_EQ(*p.ec, errc::invalid_limit);
  std::error_code ec;
  EXPECT_FALSE(lim.acquire("k", none, 10min, ec));
  EXPECT_EQ(ec, errc::invalid_limit);
}

TEST(SlotWaitTest, DestroyingTheLimiterCompletesItsWaiters) {
  boost::asio::io_context ctx;
  std::vector<outcome> got(2);
  slot holder;
  {
    auto lim = limiter::in_memory();
    auto copy = lim;  // the last handle going away is what counts
    holder = lim.try_acquire("k", one);
    for (auto& o : got) {
      copy.async_acquire("k", one, 10min, boost::asio::bind_executor(ctx, record(o)));
    }
    poll(ctx);
    for (const auto& o : got) ASSERT_FALSE(o.ec);
    lim = limiter::in_memory();
    poll(ctx);
    for (const auto& o : got) EXPECT_FALSE(o.ec) << "a copy is still alive";
  }
  poll(ctx);
  for (const auto& o : got) {
    ASSERT_TRUE(o.ec);
    EXPECT_EQ(*o.ec, std::errc::operation_canceled);
    EXPECT_FALSE(o.s);
  }
  EXPECT_TRUE(holder) << "a slot outlives its limiter";
  holder.release();  // and its release wakes nobody (there is nobody left)
  poll(ctx);
}

TEST(SlotWaitTest, WaitersOnSeveralThreadsAreAllServedAndNeverHoldMoreThanTheLimit) {
  // Completions and releases on four threads at once (for TSan): each waiter gives its slot
  // back from its handler, which wakes the next one. run() returns once every wait is over,
  // with no timer left (a served waiter's deadline timer is cancelled).
  boost::asio::io_context ctx;
  auto lim = limiter::in_memory();
  const concurrency_policy three{.limit = 3, .lease_ttl = std::chrono::minutes{10}};
  std::vector<slot> held;
  for (int i = 0; i < 3; ++i) held.push_back(lim.try_acquire("k", three));
  constexpr int waiters = 200;
  std::atomic<int> served{0}, in_flight{0}, most{0}, failed{0};
  for (int i = 0; i < waiters; ++i) {
    lim.async_acquire("k", three, 10min,
                      boost::asio::bind_executor(ctx, [&](std::error_code ec, slot s) {
                        if (ec || !s) {
                          failed.fetch_add(1);
                        } else {
                          const int now = in_flight.fetch_add(1) + 1;
                          int m = most.load();
                          while (now > m && !most.compare_exchange_weak(m, now)) {
                          }
                          in_flight.fetch_sub(1);  // then `s` is released, waking the next
                        }
                        served.fetch_add(1);
                      }));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { ctx.run(); });
  held.clear();  // frees three slots: three chains of wake-ups serve the 200 waiters
  for (auto& t : threads) t.join();
  EXPECT_EQ(served.load(), waiters);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(lim.try_acquire("k", three).in_flight(), 1u) << "every slot was given back";
}

TEST(SlotWaitTest, BlockingAcquireIsServedByARelease) {
  auto lim = limiter::in_memory();
  slot holder = lim.try_acquire("k", one);
  // A release from a completion of another waiter: the blocking form waits the same way.
  boost::asio::io_context ctx;
  outcome first;
  lim.async_acquire("k", one, 10min, boost::asio::bind_executor(ctx, record(first)));
  holder.release();
  poll(ctx);
  ASSERT_TRUE(first.ec);
  ASSERT_TRUE(first.s);
  std::error_code ec;
  EXPECT_FALSE(lim.acquire("k", one, 0ms, ec)) << "held by the first waiter";
  first.s.release();
  EXPECT_TRUE(lim.acquire("k", one, 10min, ec));
  EXPECT_FALSE(ec);
}

}  // namespace
}  // namespace sluice
