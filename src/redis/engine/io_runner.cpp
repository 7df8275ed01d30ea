#include "redis/engine/io_runner.hpp"

#include <exception>
#include <utility>

#include <boost/asio/post.hpp>

#include "core/log.hpp"

namespace sluice::redis {
namespace asio = boost::asio;

io_runner::io_runner(std::unique_ptr<asio::io_context> own, asio::io_context& io, std::string name)
    : own_(std::move(own)), io_(io), name_(std::move(name)) {
  if (own_) work_.emplace(own_->get_executor());
}

std::shared_ptr<io_runner> io_runner::own(std::string name) {
  auto io = std::make_unique<asio::io_context>(1);
  auto& ref = *io;
  return std::shared_ptr<io_runner>(new io_runner(std::move(io), ref, std::move(name)));
}

std::shared_ptr<io_runner> io_runner::borrowed(asio::io_context& io) {
  return std::shared_ptr<io_runner>(new io_runner(nullptr, io, {}));
}

io_runner::~io_runner() {
  // The last owner is the thread itself (detached) or an owner that called finish().
  if (thread_.joinable()) thread_.detach();
}

void io_runner::start(std::chrono::microseconds poll_for, std::function<bool()> light) {
  if (!own_ || thread_.joinable()) return;
  // The thread holds what it runs; see the header.
  thread_ = std::thread([self = shared_from_this(), poll_for, light = std::move(light)] {
    for (;;) {
      try {
        self->run(poll_for, light);
        return;
      } catch (const std::exception& e) {
        sluice::detail::logf(sluice::log_level::error, "{}: I/O thread: unexpected exception: {}",
                             self->name_, e.what());
      }
    }
  });
}

void io_runner::run(std::chrono::microseconds poll_for, const std::function<bool()>& light) {
  if (poll_for <= std::chrono::microseconds::zero() || !light) {
    io_.run();
    return;
  }
  auto busy_at = std::chrono::steady_clock::now();
  while (!io_.stopped()) {
    if (io_.poll() > 0) {
      busy_at = std::chrono::steady_clock::now();
    } else if (light() && std::chrono::steady_clock::now() - busy_at < poll_for) {
      std::this_thread::yield();
    } else {
      io_.run_one();
      busy_at = std::chrono::steady_clock::now();
    }
  }
}

void io_runner::finish() {
  if (!own_ || finished_) return;
  finished_ = true;
  if (!thread_.joinable()) {  // never started: nothing runs it
    work_.reset();
    return;
  }
  // Posted after the owner's stops, so it runs after them; run() then returns as soon as
  // the handlers those stops aborted have run.
  asio::post(io_, [self = shared_from_this()] { self->work_.reset(); });
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // the thread holds this runner and finishes on its own
  } else {
    thread_.join();
  }
}

bool io_runner::on_io_thread() const {
  if (own_) return std::this_thread::get_id() == thread_.get_id();
  return io_.get_executor().running_in_this_thread();
}

}  // namespace sluice::redis
