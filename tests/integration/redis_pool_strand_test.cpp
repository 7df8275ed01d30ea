// Async checks on Redis whose handler is bound to an executor that is not an io_context's (a
// strand of a thread pool, inside an any_io_executor) complete on that executor. Boost 1.74's
// any_executor::target<T>() casts without checking the type, which once made such a
// completion be taken for an io_context's and posted to the pool outside its strand (found
// by ThreadSanitizer in sluiced's Envoy RLS, whose gRPC completions run on such a strand).
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "support/redis_server.hpp"

namespace {

using namespace sluice;
namespace asio = boost::asio;

TEST(RedisPoolStrandTest, ChecksBoundToAThreadPoolStrandCompleteOnThatStrand) {
  test::redis_server redis;
  redis_options o;
  o.url = redis.url();
  limiter lim(make_redis_backend(o.url, o));
  asio::thread_pool pool(2);
  const auto strand = asio::make_strand(pool.get_executor());
  const asio::any_io_executor ex = strand;
  policy p{.capacity = 1000, .refill_per_second = 1};
  constexpr int n = 200;
  std::atomic<int> on_strand{0}, done{0};
  for (int i = 0; i < n; ++i) {
    lim.async_check("pool-strand", p, 1,
                    asio::bind_executor(ex, [&](std::error_code ec, decision d) {
                      EXPECT_FALSE(ec);
                      EXPECT_FALSE(d.degraded);
                      if (strand.running_in_this_thread()) ++on_strand;
                      ++done;
                    }));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (done.load() < n && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  EXPECT_EQ(done.load(), n);
  EXPECT_EQ(on_strand.load(), n);
  pool.join();
}

}  // namespace
