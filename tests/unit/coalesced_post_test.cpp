// sluice::detail::post_coalesced (src/core/coalesced_post.hpp): how checks completed together reach
// an io_context. What a caller relies on: each completion runs exactly once, in order, on its
// io_context, never inline; the io_context does not run out of work while completions are held
// back; and a completion that throws loses none of the others.
#include "core/coalesced_post.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>

#include <gtest/gtest.h>

namespace sluice::detail {
namespace {

TEST(CoalescedPostTest, OutsideAScopeEachCompletionIsPostedOnItsOwn) {
  boost::asio::io_context io;
  std::string ran;
  post_coalesced(io, [&] { ran += 'a'; });
  post_coalesced(io, [&] { ran += 'b'; });
  EXPECT_EQ(ran, "");  // never inline
  EXPECT_EQ(io.poll(), 2u);
  EXPECT_EQ(ran, "ab");
}

TEST(CoalescedPostTest, InAScopeTheCompletionsForOneContextArePostedOnceWhenItEnds) {
  boost::asio::io_context io;
  std::string ran;
  {
    coalescing_scope scope;
    for (char c : std::string("abc")) post_coalesced(io, [&ran, c] { ran += c; });
    // Held back, yet counted as work: a run() or poll() now neither runs them nor stops.
    EXPECT_EQ(io.poll(), 0u);
    EXPECT_FALSE(io.stopped());
    EXPECT_EQ(ran, "");
  }
  EXPECT_EQ(io.poll(), 1u);   // one operation...
  EXPECT_EQ(ran, "abc");      // ...running all three, in order
  EXPECT_TRUE(io.stopped());  // and no work is left behind
}

TEST(CoalescedPostTest, EachContextGetsItsOwnOperationWithItsOwnCompletions) {
  boost::asio::io_context one;
  boost::asio::io_context two;
  std::string ran_one;
  std::string ran_two;
  {
    coalescing_scope scope;
    post_coalesced(one, [&] { ran_one += '1'; });
    post_coalesced(two, [&] { ran_two += 'x'; });
    post_coalesced(one, [&] { ran_one += '2'; });
    post_coalesced(two, [&] { ran_two += 'y'; });
  }
  EXPECT_EQ(one.poll(), 1u);
  EXPECT_EQ(two.poll(), 1u);
  EXPECT_EQ(ran_one, "12");
  EXPECT_EQ(ran_two, "xy");
}

TEST(CoalescedPostTest, NestedScopesPostWhenTheOutermostEnds) {
  boost::asio::io_context io;
  std::string ran;
  {
    coalescing_scope outer;
    post_coalesced(io, [&] { ran += 'a'; });
    {
      coalescing_scope inner;
      post_coalesced(io, [&] { ran += 'b'; });
    }
    EXPECT_EQ(io.poll(), 0u);
    post_coalesced(io, [&] { ran += 'c'; });
  }
  EXPECT_EQ(io.poll(), 1u);
  EXPECT_EQ(ran, "abc");
}

TEST(CoalescedPostTest, ACompletionThatThrowsLosesNoneOfTheOthers) {
  boost::asio::io_context io;
  std::string ran;
  {
    coalescing_scope scope;
    post_coalesced(io, [&] { ran += 'a'; });
    post_coalesced(io, [] { throw std::runtime_error("handler failed"); });
    post_coalesced(io, [&] { ran += 'c'; });
    post_coalesced(io, [&] { ran += 'd'; });
  }
  // As with Asio's own handlers: the exception leaves run(), and run() again goes on.
  EXPECT_THROW(io.run(), std::runtime_error);
  EXPECT_EQ(ran, "a");
  io.restart();
  io.run();
  EXPECT_EQ(ran, "acd");
}

TEST(CoalescedPostTest, ACompletionThatStopsTheContextStopsTheOthersUntilRestart) {
  boost::asio::io_context io;
  std::string ran;
  {
    coalescing_scope scope;
    post_coalesced(io, [&] { ran += 'a'; });
    post_coalesced(io, [&] {
      ran += 'b';
      io.stop();
    });
    post_coalesced(io, [&] { ran += 'c'; });
  }
  io.run();  // returns after 'b', as it would with three handlers of its own
  EXPECT_EQ(ran, "ab");
  io.restart();
  io.run();
  EXPECT_EQ(ran, "abc");
}

TEST(CoalescedPostTest, EachCompletionIsDestroyedOnceItHasRun) {
  boost::asio::io_context io;
  auto first = std::make_shared<int>(0);
  std::weak_ptr<int> watch = first;
  bool first_gone_before_second = false;
  {
    coalescing_scope scope;
    post_coalesced(io, [first = std::move(first)] { ++*first; });
    post_coalesced(io, [&] { first_gone_before_second = watch.expired(); });
  }
  io.run();
  EXPECT_TRUE(first_gone_before_second);
}

TEST(CoalescedPostTest, ScopesOnOtherThreadsDoNotHoldBackThisThreadsPosts) {
  boost::asio::io_context io;
  int ran = 0;
  coalescing_scope here;  // this thread's scope says nothing about another thread's posts
  std::thread([&] { post_coalesced(io, [&] { ++ran; }); }).join();
  EXPECT_EQ(io.poll(), 1u);
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace sluice::detail
