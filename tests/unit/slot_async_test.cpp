// slot::async_release and slot::async_renew on the memory backend (manual clock): they
// complete on the handler's executor, never inline (the memory backend answers inline), and
// answer as release() and renew() do; a backend that fails is reported, not hidden. No sleeps.
#include <gtest/gtest.h>

#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <sluice/concurrency.hpp>
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/memory_backend.hpp>

namespace sluice {
namespace {

using std::chrono::milliseconds;

// The memory backend, whose slot steps fail while `down` is set, as Redis's do when it is.
class switchable_slots final : public backend {
 public:
  explicit switchable_slots(std::shared_ptr<backend> inner) : inner_(std::move(inner)) {}
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
    if (down) {
      handler(errc::backend_timeout, {});
      return;
    }
    inner_->async_slot(key, request, std::move(handler));
  }
  bool down = false;

 private:
  std::shared_ptr<backend> inner_;
};

class AsyncSlots : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<switchable_slots> mem_ =
      std::make_shared<switchable_slots>(make_memory_backend({.time_source = clock_}));
  limiter lim_{mem_, make_memory_backend({.time_source = clock_})};
  const concurrency_policy p_{.limit = 1, .lease_ttl = milliseconds{100}};
};

TEST_F(AsyncSlots, ReleaseCompletesOnTheHandlersExecutorAndFreesTheSlot) {
  boost::asio::io_context io;
  auto s = lim_.try_acquire("k", p_);
  ASSERT_TRUE(s);
  std::vector<std::error_code> got;
  s.async_release(boost::asio::bind_executor(io.get_executor(),
                                             [&](std::error_code ec) { got.push_back(ec); }));
  EXPECT_FALSE(s) << "not held from the call on";
  EXPECT_TRUE(got.empty()) << "not run inline, though the memory backend answered inline";
  EXPECT_EQ(io.run(), 1u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0]);
  EXPECT_TRUE(lim_.try_acquire("k", p_)) << "the slot is free again";
  EXPECT_EQ(lim_.slot_stats().released, 2u) << "the async release and the second slot's";
}

TEST_F(AsyncSlots, ReleaseOfASlotNotHeldCompletesWithoutError) {
  slot none;
  EXPECT_FALSE(none.async_release(boost::asio::use_future).get());
  auto s = lim_.try_acquire("k", p_);
  s.release();
  EXPECT_FALSE(s.async_release(boost::asio::use_future).get());
  EXPECT_EQ(lim_.slot_stats().released, 1u);
}

TEST_F(AsyncSlots, ReleaseReportsTheBackendsError) {
  auto s = lim_.try_acquire("k", p_);
  mem_->down = true;
  EXPECT_EQ(s.async_release(boost::asio::use_future).get(), errc::backend_timeout);
  EXPECT_FALSE(s) << "given up here: its lease ends by itself";
  EXPECT_EQ(lim_.slot_stats().backend_errors, 1u);
}

TEST_F(AsyncSlots, RenewKeepsASlowHolderPastItsFirstLease) {
  boost::asio::io_context io;
  auto s = lim_.try_acquire("k", p_);
  for (int i = 0; i < 10; ++i) {
    clock_->advance(milliseconds{90});
    std::vector<bool> held;
    s.async_renew(boost::asio::bind_executor(io.get_executor(), [&](std::error_code ec, bool h) {
      EXPECT_FALSE(ec);
      held.push_back(h);
    }));
    EXPECT_TRUE(held.empty()) << "not run inline";
    io.restart();
    EXPECT_EQ(io.run(), 1u);
    ASSERT_EQ(held, std::vector<bool>{true}) << "renewal " << i;
  }
  EXPECT_TRUE(s);
  EXPECT_EQ(s.expires_in(), milliseconds{100});
  EXPECT_FALSE(lim_.try_acquire("k", p_)) << "900 ms later, well past one lease, still held";
  EXPECT_EQ(lim_.slot_stats().renewed, 10u);
}

TEST_F(AsyncSlots, RenewOfAnEndedLeaseAnswersFalseAndDoesNotFreeTheNewHolder) {
  auto old = lim_.try_acquire("k", p_);
  clock_->advance(milliseconds{100});
  auto next = lim_.try_acquire("k", p_);
  ASSERT_TRUE(next) << "old's lease ended";
  auto [ec, held] = old.async_renew(boost::asio::use_future).get();
  EXPECT_FALSE(ec);
  EXPECT_FALSE(held);
  EXPECT_FALSE(old) << "a slot found ended is no longer held";
  EXPECT_FALSE(old.async_release(boost::asio::use_future).get());
  EXPECT_FALSE(lim_.try_acquire("k", p_)) << "next still holds the only slot";
  EXPECT_EQ(lim_.slot_stats().renew_failures, 1u);
}

TEST_F(AsyncSlots, RenewReportsTheBackendsErrorAndKeepsTheSlot) {
  auto s = lim_.try_acquire("k", p_);
  mem_->down = true;
  auto [ec, held] = s.async_renew(boost::asio::use_future).get();
  EXPECT_EQ(ec, errc::backend_timeout);
  EXPECT_FALSE(held);
  EXPECT_TRUE(s) << "kept, so that it is released later";
  EXPECT_EQ(lim_.slot_stats().renew_failures, 1u);
  mem_->down = false;
  EXPECT_TRUE(s.renew()) << "the blocking form: the same step, waited for";
}

TEST_F(AsyncSlots, RenewOfASlotNotHeldAnswersFalse) {
  slot none;
  auto [ec, held] = none.async_renew(boost::asio::use_future).get();
  EXPECT_FALSE(ec);
  EXPECT_FALSE(held);
}

}  // namespace
}  // namespace sluice
