// Where a ShouldRateLimit is decided and answered with `redis_connections: per_thread`, on a
// real Redis (docs/daemon.md, "Which thread and which Redis connection answers"): a call
// served on a server thread, as the gRPC listener serves every stream of a connection on
// the thread it gave that connection, is decided by that thread's own Redis connection and
// answered on that thread, never on another thread's connection or an I/O thread.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "config.hpp"
#include "envoy_rls.hpp"
#include "service.hpp"
#include "support/process_child.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

namespace asio = boost::asio;

// The server threads of sluiced: one io_context each, run by its own thread.
class server_threads {
 public:
  explicit server_threads(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      ios_.push_back(std::make_unique<asio::io_context>());
      guards_.emplace_back(asio::make_work_guard(*ios_.back()));
    }
    for (auto& io : ios_) threads_.emplace_back([&io = *io] { io.run(); });
  }
  ~server_threads() {
    guards_.clear();
    for (auto& t : threads_) t.join();
  }
  std::vector<asio::io_context*> contexts() const {
    std::vector<asio::io_context*> out;
    for (const auto& io : ios_) out.push_back(io.get());
    return out;
  }
  std::thread::id id(std::size_t i) const { return threads_[i].get_id(); }

 private:
  std::vector<std::unique_ptr<asio::io_context>> ios_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
};

TEST(DaemonRlsRoutingTest, PerThreadCallsAreDecidedByTheirThreadsConnection) {
  redis_server redis;
  const auto dir = make_temp_dir("sluice-rls-routing");
  std::ofstream(dir + "/limits.yaml") << R"(domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 100}
)";
  auto c = daemon::parse_config("backend: " + redis.url() +
                                    "\nredis_connections: per_thread\n"
                                    "policies: {api: {capacity: 5, refill_per_second: 1}}\n"
                                    "envoy_rls:\n  config: " +
                                    dir + "/limits.yaml\n",
                                "routing.yaml");
  {
    server_threads threads(2);
    daemon::service svc(std::move(c), threads.contexts());
    const auto rt = svc.current();
    ASSERT_EQ(rt->thread_limiters.size(), 2u);
    const auto workers = threads.contexts();

    // `calls` ShouldRateLimit on server thread `i`, one after another; the threads that
    // answered them.
    auto serve_on = [&](std::size_t i, int calls) {
      std::vector<std::thread::id> answered;
      for (int k = 0; k < calls; ++k) {
        std::promise<std::thread::id> done;
        asio::post(*workers[i], [&] {
          daemon::rls_request req;
          req.domain = "edge";
          req.descriptors.push_back({{{"tenant", "t" + std::to_string(i)}}, {}, {}});
          svc.rls().decide(svc.current(), std::move(req), workers[i]->get_executor(),
                           [&done](daemon::rls_answer a) {
                             EXPECT_EQ(a.what, daemon::rls_answer::kind::decided) << a.why;
                             done.set_value(std::this_thread::get_id());
                           });
        });
        auto f = done.get_future();
        EXPECT_EQ(f.wait_for(std::chrono::seconds{10}), std::future_status::ready);
        answered.push_back(f.get());
      }
      return answered;
    };
    auto decided_by = [&](std::size_t i) {
      const auto s = rt->thread_limiters[i].second->stats();
      return s.allowed + s.denied;
    };
    const auto before0 = decided_by(0), before1 = decided_by(1);
    for (const auto id : serve_on(0, 5)) EXPECT_EQ(id, threads.id(0));
    EXPECT_EQ(decided_by(0), before0 + 5) << "thread 0's calls, on thread 0's connection";
    EXPECT_EQ(decided_by(1), before1);
    for (const auto id : serve_on(1, 3)) EXPECT_EQ(id, threads.id(1));
    EXPECT_EQ(decided_by(1), before1 + 3) << "thread 1's calls, on thread 1's connection";
    EXPECT_EQ(decided_by(0), before0 + 5);
    EXPECT_EQ(rt->limiter_stats().degraded_open + rt->limiter_stats().degraded_closed, 0u);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace sluice::test
