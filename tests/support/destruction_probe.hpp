#pragma once
// For tests of where async completions go: a value to capture in a handler that records,
// when the handler's last live copy is destroyed, whether that happened on the thread the
// handler belongs to. Moved-from copies do not count.
#include <atomic>
#include <thread>
#include <utility>

namespace sluice::test {

struct destruction_record {
  std::thread::id home;           ///< where the handler is to be destroyed
  std::atomic<int> destroyed{0};  ///< last live copies destroyed
  std::atomic<int> elsewhere{0};  ///< ... of them on another thread than `home`
};

struct destruction_probe {
  destruction_record* record;
  bool live = true;
  explicit destruction_probe(destruction_record* r) : record(r) {}
  destruction_probe(const destruction_probe&) = default;
  destruction_probe(destruction_probe&& o) noexcept
      : record(o.record), live(std::exchange(o.live, false)) {}
  destruction_probe& operator=(const destruction_probe&) = delete;
  destruction_probe& operator=(destruction_probe&&) = delete;
  ~destruction_probe() {
    if (!live) return;
    if (std::this_thread::get_id() != record->home) ++record->elsewhere;
    ++record->destroyed;
  }
};

}  // namespace sluice::test
