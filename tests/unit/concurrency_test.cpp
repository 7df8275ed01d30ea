// Concurrency limits in process: the memory backend's slots on a manual clock, sluice::slot
// (release by the destructor and by move, renew, detach), the limiter's validation, async
// form, failure modes and counters. No sleeps: time moves only when a test moves it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <sluice/concurrency.hpp>
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/memory_backend.hpp>

#include "algorithm/slots.hpp"
#include "core/slot_support.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;

concurrency_policy slots(std::uint64_t limit, milliseconds ttl = milliseconds{1000},
                         failure_mode mode = failure_mode::open) {
  return {limit, ttl, mode};
}

class MemorySlots : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<backend> mem_ = make_memory_backend({.time_source = clock_});
  limiter lim_{mem_, mem_};

  slot_reply step(std::string_view key, slot_operation op, const std::string& id,
                  std::uint64_t limit = 1, milliseconds ttl = milliseconds{1000}) {
    slot_reply out;
    std::error_code ec = detail::slot_step_blocking(*mem_, key, {op, id, limit, ttl}, out);
    EXPECT_FALSE(ec) << ec.message();
    return out;
  }
};

const std::string id_a(32, 'a'), id_b(32, 'b'), id_c(32, 'c');

TEST_F(MemorySlots, BackendAdmitsAtMostLimitAndFreesASlotWhenItsLeaseEnds) {
  EXPECT_TRUE(step("k", slot_operation::acquire, id_a, 2).held);
  clock_->advance(milliseconds{400});
  EXPECT_TRUE(step("k", slot_operation::acquire, id_b, 2).held);
  const auto refused = step("k", slot_operation::acquire, id_c, 2);
  EXPECT_FALSE(refused.held);
  EXPECT_EQ(refused.in_flight, 2u);
  EXPECT_EQ(refused.retry_after, milliseconds{600}) << "a's lease ends 1000 ms after it began";
  clock_->advance(milliseconds{600});
  const auto later = step("k", slot_operation::acquire, id_c, 2);
  EXPECT_TRUE(later.held) << "a's lease ended";
  EXPECT_EQ(later.in_flight, 2u);
  EXPECT_EQ(later.expires_in, milliseconds{1000});
}

TEST_F(MemorySlots, BackendKeysAreIndependentAndAReleaseFreesOnlyItsOwnSlot) {
  EXPECT_TRUE(step("k1", slot_operation::acquire, id_a).held);
  EXPECT_TRUE(step("k2", slot_operation::acquire, id_b).held);
  EXPECT_FALSE(step("k1", slot_operation::release, id_b).held) << "b holds k2, not k1";
  EXPECT_FALSE(step("k1", slot_operation::acquire, id_c).held);
  EXPECT_TRUE(step("k1", slot_operation::release, id_a).held);
  EXPECT_TRUE(step("k1", slot_operation::acquire, id_c).held);
}

TEST_F(MemorySlots, BackendRefusesAMalformedId) {
  slot_reply out;
  auto ec = detail::slot_step_blocking(*mem_, "k",
                                       {slot_operation::acquire, "xyz", 1, milliseconds{10}}, out);
  EXPECT_EQ(ec, errc::invalid_slot_id);
}

TEST_F(MemorySlots, TryAcquireHoldsUpToTheLimitAndTheDestructorReleases) {
  const auto p = slots(2);
  {
    auto s1 = lim_.try_acquire("k", p);
    auto s2 = lim_.try_acquire("k", p);
    ASSERT_TRUE(s1);
    ASSERT_TRUE(s2);
    EXPECT_EQ(s2.in_flight(), 2u);
    EXPECT_EQ(s2.limit(), 2u);
    EXPECT_EQ(s2.expires_in(), milliseconds{1000});
    EXPECT_FALSE(s2.degraded());
    EXPECT_NE(s1.id(), s2.id());
    clock_->advance(milliseconds{300});
    auto s3 = lim_.try_acquire("k", p);
    EXPECT_FALSE(s3);
    EXPECT_EQ(s3.in_flight(), 2u);
    EXPECT_EQ(s3.retry_after(), milliseconds{700});
    EXPECT_TRUE(s3.id().empty());
  }
  auto again = lim_.try_acquire("k", p);
  EXPECT_TRUE(again) << "both slots were released when they went out of scope";
  EXPECT_EQ(again.in_flight(), 1u);
  const auto st = lim_.slot_stats();
  EXPECT_EQ(st.acquired, 3u);
  EXPECT_EQ(st.refused, 1u);
  EXPECT_EQ(st.released, 2u);
}

TEST_F(MemorySlots, AMovedSlotIsReleasedOnceByItsLastOwner) {
  const auto p = slots(1);
  auto a = lim_.try_acquire("k", p);
  ASSERT_TRUE(a);
  slot b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): a moved-from slot is not held
  EXPECT_TRUE(b);
  EXPECT_FALSE(lim_.try_acquire("k", p)) << "the move did not release it";
  slot c;
  c = std::move(b);
  EXPECT_FALSE(lim_.try_acquire("k", p));
  c.release();
  EXPECT_FALSE(c);
  c.release();  // harmless
  EXPECT_EQ(lim_.slot_stats().released, 1u);
  EXPECT_TRUE(lim_.try_acquire("k", p));
}

TEST_F(MemorySlots, AssigningOverAHeldSlotReleasesIt) {
  const auto p = slots(1);
  auto a = lim_.try_acquire("a", p);
  auto b = lim_.try_acquire("b", p);
  a = std::move(b);
  EXPECT_EQ(a.key(), "b");
  EXPECT_TRUE(lim_.try_acquire("a", p)) << "a's slot was released by the assignment";
  EXPECT_FALSE(lim_.try_acquire("b", p));
}

TEST_F(MemorySlots, RenewKeepsASlowHolderPastItsFirstLease) {
  const auto p = slots(1, milliseconds{100});
  auto s = lim_.try_acquire("k", p);
  for (int i = 0; i < 10; ++i) {
    clock_->advance(milliseconds{90});
    ASSERT_TRUE(s.renew()) << "renewal " << i;
  }
  EXPECT_FALSE(lim_.try_acquire("k", p)) << "900 ms later, well past one lease, still held";
  EXPECT_EQ(lim_.slot_stats().renewed, 10u);
}

TEST_F(MemorySlots, AnExpiredSlotFailsToRenewAndItsReleaseDoesNotFreeTheNewHolder) {
  const auto p = slots(1, milliseconds{100});
  auto old = lim_.try_acquire("k", p);
  clock_->advance(milliseconds{100});
  auto next = lim_.try_acquire("k", p);
  ASSERT_TRUE(next) << "old's lease ended";
  EXPECT_FALSE(old.renew());
  EXPECT_FALSE(old) << "a slot found ended is no longer held";
  old.release();
  EXPECT_FALSE(lim_.try_acquire("k", p)) << "next still holds the only slot";
  EXPECT_EQ(lim_.slot_stats().renew_failures, 1u);
  // Releasing an ended slot by id is harmless too.
  std::error_code ec;
  auto stale = lim_.try_acquire("other", p);
  const auto stale_id = stale.detach();
  clock_->advance(milliseconds{100});
  auto fresh = lim_.try_acquire("other", p);
  ASSERT_TRUE(fresh);
  EXPECT_FALSE(lim_.slot_step("other", p, slot_operation::release, stale_id, ec).held);
  EXPECT_FALSE(ec);
  EXPECT_FALSE(lim_.try_acquire("other", p));
}

TEST_F(MemorySlots, ADetachedSlotStaysHeldUntilReleasedById) {
  const auto p = slots(1);
  std::string id;
  {
    auto s = lim_.try_acquire("k", p);
    id = s.detach();
    EXPECT_FALSE(s);
  }
  ASSERT_EQ(id.size(), 32u);
  EXPECT_FALSE(lim_.try_acquire("k", p)) << "detached: not released by the destructor";
  std::error_code ec;
  const auto renewed = lim_.slot_step("k", p, slot_operation::renew, id, ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(renewed.held);
  EXPECT_EQ(renewed.expires_in, milliseconds{1000});
  EXPECT_TRUE(lim_.slot_step("k", p, slot_operation::release, id, ec).held);
  EXPECT_FALSE(lim_.slot_step("k", p, slot_operation::release, id, ec).held) << "once";
  EXPECT_TRUE(lim_.try_acquire("k", p));
}

TEST_F(MemorySlots, ALoweredLimitTakesEffectAsSlotsFree) {
  auto a = lim_.try_acquire("k", slots(3));
  auto b = lim_.try_acquire("k", slots(3));
  auto c = lim_.try_acquire("k", slots(3));
  EXPECT_FALSE(lim_.try_acquire("k", slots(2)));
  a.release();
  EXPECT_FALSE(lim_.try_acquire("k", slots(2))) << "two still hold it";
  b.release();
  EXPECT_TRUE(lim_.try_acquire("k", slots(2)));
}

TEST_F(MemorySlots, InvalidInputIsRefusedBeforeTheBackend) {
  std::error_code ec;
  EXPECT_FALSE(lim_.try_acquire("", slots(1), ec));
  EXPECT_EQ(ec, errc::empty_key);
  EXPECT_FALSE(lim_.try_acquire(std::string(max_key_size + 1, 'k'), slots(1), ec));
  EXPECT_EQ(ec, errc::key_too_long);
  EXPECT_FALSE(lim_.try_acquire("k", slots(0), ec));
  EXPECT_EQ(ec, errc::invalid_limit);
  EXPECT_FALSE(lim_.try_acquire("k", slots(max_concurrency_limit + 1), ec));
  EXPECT_EQ(ec, errc::invalid_limit);
  EXPECT_FALSE(lim_.try_acquire("k", slots(1, milliseconds{0}), ec));
  EXPECT_EQ(ec, errc::invalid_lease_ttl);
  EXPECT_FALSE(lim_.try_acquire("k", slots(1, max_lease_ttl + milliseconds{1}), ec));
  EXPECT_EQ(ec, errc::invalid_lease_ttl);
  EXPECT_THROW(lim_.try_acquire("", slots(1)), std::system_error);
  lim_.slot_step("k", slots(1), slot_operation::release, "not an id", ec);
  EXPECT_EQ(ec, errc::invalid_slot_id);
  lim_.slot_step("k", slots(1), slot_operation::acquire, id_a, ec);
  EXPECT_EQ(ec, errc::unsupported_operation);
  EXPECT_EQ(lim_.slot_stats().invalid, 9u);
  EXPECT_EQ(lim_.slot_stats().acquired, 0u);
  EXPECT_TRUE(lim_.try_acquire("k", slots(1, max_lease_ttl))) << "the bounds are allowed";
}

TEST_F(MemorySlots, AcquireWithNoWaitBudgetAnswersAtOnce) {
  auto held = lim_.try_acquire("k", slots(1));
  auto s = lim_.acquire("k", slots(1), milliseconds{0});
  EXPECT_FALSE(s);
  EXPECT_EQ(lim_.slot_stats().refused, 1u) << "one attempt";
  held.release();
  EXPECT_TRUE(lim_.acquire("k", slots(1), milliseconds{0}));
}

TEST_F(MemorySlots, AsyncTryAcquireCompletesOnTheHandlersExecutorNeverInline) {
  boost::asio::io_context io;
  std::vector<slot> got;
  lim_.async_try_acquire(
      "k", slots(1), boost::asio::bind_executor(io.get_executor(), [&](std::error_code ec, slot s) {
        EXPECT_FALSE(ec);
        EXPECT_TRUE(s);
        got.push_back(std::move(s));
      }));
  EXPECT_TRUE(got.empty()) << "not run inline, though the memory backend answered inline";
  EXPECT_EQ(io.run(), 1u) << "the completion was posted to the io_context";
  ASSERT_EQ(got.size(), 1u);
  auto [ec, refused] = lim_.async_try_acquire("k", slots(1), boost::asio::use_future).get();
  EXPECT_FALSE(ec);
  EXPECT_FALSE(refused) << "k's slot is held by the io_context's handler";
  auto [bad, none] = lim_.async_try_acquire("", slots(1), boost::asio::use_future).get();
  EXPECT_EQ(bad, errc::empty_key);
  EXPECT_FALSE(none);
}

TEST_F(MemorySlots, ASlotWhoseHandlerNeverRunsIsReleased) {
  {
    boost::asio::io_context io;
    lim_.async_try_acquire(
        "k", slots(1), boost::asio::bind_executor(io.get_executor(), [](std::error_code, slot) {}));
    // io is destroyed without running: the posted completion and its slot go with it.
  }
  EXPECT_TRUE(lim_.try_acquire("k", slots(1)));
}

TEST_F(MemorySlots, ThreadsNeverHoldMoreThanTheLimit) {
  const auto p = slots(5, milliseconds{60'000});
  std::atomic<int> in_flight{0}, most{0}, held{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto s = lim_.try_acquire("k", p);
        if (!s) continue;
        held.fetch_add(1);
        const int now = in_flight.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        in_flight.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 5);
  EXPECT_GT(held.load(), 0);
  const auto st = lim_.slot_stats();
  EXPECT_EQ(st.acquired + st.refused, 16'000u);
  EXPECT_EQ(st.released, st.acquired);
}

TEST(SlotIds, Are32HexDigitsAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 10'000; ++i) {
    auto id = detail::new_slot_id();
    ASSERT_TRUE(detail::parse_slot_id(id).has_value()) << id;
    ASSERT_EQ(id, detail::to_hex(*detail::parse_slot_id(id))) << "lowercase";
    ASSERT_TRUE(seen.insert(id).second) << "repeated: " << id;
  }
}

// Ids are drawn in blocks (a thread's pool, the process's generator): a forked child starts
// with copies of both, and must still never hand out an id its parent hands out. More ids
// than a pool holds, so that both also draw from the generator after the fork.
TEST(SlotIds, AForkedChildNeverDrawsItsParentsIds) {
  (void)detail::new_slot_id();  // the pool and the generator have state before the fork
  constexpr int count = 600;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    for (int i = 0; i < count; ++i) {
      const auto id = detail::new_slot_id();
      if (::write(fds[1], id.data(), id.size()) != static_cast<ssize_t>(id.size())) ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::set<std::string> parent;
  for (int i = 0; i < count; ++i) parent.insert(detail::new_slot_id());
  std::string from_child;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) from_child.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(from_child.size(), 32u * count);
  for (int i = 0; i < count; ++i) {
    const auto id = from_child.substr(32u * i, 32);
    EXPECT_FALSE(parent.contains(id)) << "the child's id #" << i << " is its parent's too: " << id;
  }
}

// A backend whose every slot step fails, as Redis does when it is down.
class failing_slots final : public backend {
 public:
  std::error_code decide(std::string_view, const policy&, std::uint64_t, decision&) override {
    return errc::backend_unavailable;
  }
  void async_decide(std::string_view, const policy&, std::uint64_t,
                    decide_handler handler) override {
    handler(errc::backend_unavailable, {});
  }
  void async_slot(std::string_view, const slot_request&, slot_handler handler) override {
    ++calls;
    handler(errc::backend_timeout, {});
  }
  int calls = 0;
};

class SlotFailureModes : public ::testing::Test {
 protected:
  std::shared_ptr<failing_slots> down_ = std::make_shared<failing_slots>();
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  limiter lim_{down_, make_memory_backend({.time_source = clock_})};
};

TEST_F(SlotFailureModes, OpenHoldsADegradedSlotThatNoBackendRecords) {
  auto s = lim_.try_acquire("k", slots(1, milliseconds{1000}, failure_mode::open));
  auto t = lim_.try_acquire("k", slots(1, milliseconds{1000}, failure_mode::open));
  EXPECT_TRUE(s);
  EXPECT_TRUE(t) << "no limit while the backend is down";
  EXPECT_TRUE(s.degraded());
  EXPECT_EQ(s.backend_error(), errc::backend_timeout);
  EXPECT_TRUE(s.id().empty());
  EXPECT_TRUE(s.renew()) << "nothing to renew: held by the failure mode";
  s.release();
  EXPECT_EQ(down_->calls, 2) << "neither renew nor release asked the backend";
  const auto st = lim_.slot_stats();
  EXPECT_EQ(st.degraded_open, 2u);
  EXPECT_EQ(st.acquired, 2u);
  EXPECT_EQ(st.backend_errors, 2u);
}

TEST_F(SlotFailureModes, ClosedRefuses) {
  auto s = lim_.try_acquire("k", slots(3, milliseconds{500}, failure_mode::closed));
  EXPECT_FALSE(s);
  EXPECT_TRUE(s.degraded());
  EXPECT_EQ(s.retry_after(), milliseconds{500});
  EXPECT_EQ(lim_.slot_stats().degraded_closed, 1u);
  EXPECT_EQ(lim_.slot_stats().refused, 1u);
  auto waited =
      lim_.acquire("k", slots(3, milliseconds{500}, failure_mode::closed), milliseconds{60'000});
  EXPECT_FALSE(waited) << "a degraded refusal is answered at once, not waited out";
}

TEST_F(SlotFailureModes, LocalLimitsInProcessAndReleasesThere) {
  const auto p = slots(2, milliseconds{1000}, failure_mode::local);
  auto a = lim_.try_acquire("k", p);
  auto b = lim_.try_acquire("k", p);
  auto c = lim_.try_acquire("k", p);
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  EXPECT_FALSE(c) << "the fallback's limit of 2";
  EXPECT_TRUE(a.degraded() && b.degraded() && c.degraded());
  EXPECT_EQ(a.id().size(), 32u);
  EXPECT_TRUE(a.renew()) << "renewed on the fallback";
  a.release();
  EXPECT_TRUE(lim_.try_acquire("k", p)) << "released on the fallback";
  // By id too (a detached slot, as sluiced hands out).
  const auto id = b.detach();
  std::error_code ec;
  EXPECT_TRUE(lim_.slot_step("k", p, slot_operation::release, id, ec).held);
  EXPECT_FALSE(ec);
  EXPECT_EQ(lim_.slot_stats().degraded_local, 5u);
}

TEST_F(SlotFailureModes, RenewAndStepsReportTheBackendsError) {
  std::error_code ec;
  lim_.slot_step("k", slots(1), slot_operation::renew, id_a, ec);
  EXPECT_EQ(ec, errc::backend_timeout) << "open does not make up a renewal";
  EXPECT_EQ(lim_.slot_stats().renew_failures, 1u);
}

}  // namespace
}  // namespace sluice
