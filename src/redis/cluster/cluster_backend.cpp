// make_redis_cluster_backend: a sluice::backend over cluster_client, with the I/O thread
// and the blocking call shaped exactly like the standalone Redis backend's.
#include <sluice/error.hpp>
#include <sluice/redis_cluster.hpp>

#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "core/await_decision.hpp"
#include "redis/cluster/cluster_backend.hpp"
#include "redis/cluster/cluster_client.hpp"
#include "redis/tls.hpp"

namespace sluice {
namespace {
namespace asio = boost::asio;

// Shared with the I/O thread, so a backend destroyed on that thread can detach safely.
struct io_core {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<redis::cluster::cluster_client> client;
};

class cluster_backend final : public redis::cluster::cluster_backend_base {
 public:
  cluster_backend(const redis_options& o, const redis_cluster_url& u)
      : prefix_(o.key_prefix),
        // Calls complete by their deadline; this only keeps a bug from becoming a hang.
        wait_limit_(2 * o.command_timeout + std::chrono::seconds{1}),
        core_(std::make_shared<io_core>()) {
    // The TLS files are loaded here, before the thread starts: a bad one throws.
    core_->client = std::make_shared<redis::cluster::cluster_client>(core_->io, o, u,
                                                                     redis::make_tls_config(u.tls));
    core_->client->start();
    thread_ = std::thread([core = core_] {
      for (;;) {
        try {
          core->io.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("sluice cluster: I/O thread: unexpected exception: {}", e.what());
        }
      }
    });
  }

  ~cluster_backend() override {
    core_->client->stop();
    asio::post(core_->io, [core = core_.get()] { core->work.reset(); });
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }

  std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                         decision& out) override {
    if (std::this_thread::get_id() == thread_.get_id())
      return make_error_code(errc::backend_unavailable);
    return detail::await_decision(
        [&](decide_handler done) { async_decide(key, p, cost, std::move(done)); }, wait_limit_,
        out);
  }

  void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                    decide_handler handler) override {
    if (p.algorithm != algorithm::token_bucket) {
      handler(make_error_code(errc::unsupported_algorithm), {});
      return;
    }
    std::string full_key;
    full_key.reserve(prefix_.size() + key.size());
    full_key.append(prefix_).append(key);
    core_->client->submit(std::move(full_key), detail::to_params(p, cost), p.capacity,
                          std::move(handler));
  }

  redis::cluster::cluster_stats stats() const noexcept override { return core_->client->stats(); }

 private:
  std::string prefix_;
  std::chrono::nanoseconds wait_limit_;
  std::shared_ptr<io_core> core_;
  std::thread thread_;
};

}  // namespace

std::shared_ptr<backend> make_redis_cluster_backend(redis_options options) {
  std::string why;
  const auto url = parse_redis_cluster_url(options.url, &why);
  if (!url) throw std::invalid_argument("invalid Redis Cluster URL: " + why);
  if (options.connect_timeout.count() <= 0 || options.command_timeout.count() <= 0)
    throw std::invalid_argument("Redis connect and command timeouts must be positive");
  if (options.max_in_flight == 0) throw std::invalid_argument("max_in_flight must be positive");
  if (options.reconnect_backoff_min.count() <= 0 ||
      options.reconnect_backoff_max < options.reconnect_backoff_min)
    throw std::invalid_argument("reconnect backoff must satisfy 0 < min <= max");
  return std::make_shared<cluster_backend>(options, *url);
}

}  // namespace sluice
