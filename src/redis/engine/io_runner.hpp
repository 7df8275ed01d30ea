#pragma once
// Who runs a Redis backend's I/O, written once for every topology: an io_context and a thread
// of the backend's own, or the caller's io_context (redis_options::run_on), which the caller
// runs. It owns the thread's start, its loop (which logs an exception and carries on: a
// handler's bug must not end every later call), and its end.
//
// Shared: the thread holds its runner, so a backend destroyed on its own I/O thread (its last
// owner released in a completion handler) detaches the thread, which then finishes the
// handlers still queued and frees the runner and its io_context itself.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace sluice::redis {

class io_runner : public std::enable_shared_from_this<io_runner> {
 public:
  /// An io_context of its own, run by a thread of its own from start() on. `name` is for
  /// log lines ("sluice redis", ...).
  static std::shared_ptr<io_runner> own(std::string name);
  /// The caller's io_context: no thread, start() and finish() do nothing.
  static std::shared_ptr<io_runner> borrowed(boost::asio::io_context& io);

  io_runner(const io_runner&) = delete;
  io_runner& operator=(const io_runner&) = delete;
  ~io_runner();

  boost::asio::io_context& io() noexcept { return io_; }
  bool owns_thread() const noexcept { return own_ != nullptr; }

  /// Starts the thread (own only; once). With `poll_for` > 0, after the last handler ran the
  /// thread polls for that long while `light()`, before it sleeps (see
  /// redis_options::poll_before_sleep).
  void start(std::chrono::microseconds poll_for = {}, std::function<bool()> light = {});
  /// Call after posting the stops of what runs on it: the thread finishes every handler
  /// posted so far and ends, and is joined; on the thread itself, it is detached instead.
  /// Idempotent.
  void finish();
  /// Whether the calling thread runs this I/O: a blocking wait there would never end.
  bool on_io_thread() const;

 private:
  io_runner(std::unique_ptr<boost::asio::io_context> own, boost::asio::io_context& io,
            std::string name);
  void run(std::chrono::microseconds poll_for, const std::function<bool()>& light);

  std::unique_ptr<boost::asio::io_context> own_;
  boost::asio::io_context& io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::string name_;
  std::thread thread_;
  bool finished_ = false;
};

/// How long a blocking call waits for its completion. Every call completes by its deadline;
/// this bound only keeps a bug from becoming a hang.
inline std::chrono::nanoseconds blocking_wait_limit(std::chrono::milliseconds command_timeout) {
  return 2 * command_timeout + std::chrono::seconds{1};
}

}  // namespace sluice::redis
