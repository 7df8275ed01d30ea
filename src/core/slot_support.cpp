#include "core/slot_support.hpp"

#include <array>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "algorithm/slots.hpp"
#include "core/random_bytes.hpp"

namespace sluice::detail {
namespace {

// One draw per 256 ids (4 KiB) from the process's generator (random_bytes.hpp): its
// mutex is taken once per 256 acquires.
struct random_pool {
  std::array<std::uint64_t, 512> words{};
  std::size_t next = 512;
  std::uint64_t generation = 0;
};

}  // namespace

void new_slot_id(std::array<char, 32>& hex) {
  thread_local random_pool pool;
  // A pool filled before a fork would hand the child the ids the parent hands out too.
  const auto generation = fork_generation();
  if (pool.next + 2 > pool.words.size() || pool.generation != generation) {
    fill_random_bytes(pool.words.data(), sizeof pool.words);
    pool.next = 0;
    pool.generation = generation;
  }
  // As to_hex() writes it (16 lowercase digits of each word, high word first), two digits
  // per table lookup, without snprintf: this is on every acquire.
  static constexpr auto pairs = [] {
    std::array<char, 512> t{};
    constexpr char digits[] = "0123456789abcdef";
    for (std::size_t b = 0; b < 256; ++b) {
      t[2 * b] = digits[b >> 4];
      t[2 * b + 1] = digits[b & 0xf];
    }
    return t;
  }();
  for (std::size_t w = 0; w < 2; ++w) {
    std::uint64_t v = pool.words[pool.next + w];
    for (std::size_t i = 0; i < 8; ++i, v >>= 8) {
      const auto b = static_cast<std::size_t>(v & 0xff);
      hex[w * 16 + 14 - 2 * i] = pairs[2 * b];
      hex[w * 16 + 15 - 2 * i] = pairs[2 * b + 1];
    }
    // Handed out once: wiped, so that nothing later reads it from this pool.
    pool.words[pool.next + w] = 0;
  }
  pool.next += 2;
}

std::string new_slot_id() {
  std::array<char, 32> hex;
  new_slot_id(hex);
  return std::string(hex.data(), hex.size());
}

std::error_code await_slot_reply(const std::function<void(slot_handler)>& start, slot_reply& out) {
  // On this thread's stack: this waits until the handler has run (exactly once). A handler
  // on another thread touches the waiter only under its mutex, notifying before it lets
  // go; one that runs on this thread (inline: the memory backend) fills it with no lock.
  struct waiter {
    std::thread::id caller = std::this_thread::get_id();
    bool inline_done = false;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::error_code ec;
    slot_reply reply;
  } w;
  start([&w](std::error_code ec, slot_reply r) {
    if (std::this_thread::get_id() == w.caller) {
      w.ec = ec;
      w.reply = r;
      w.inline_done = true;
      return;
    }
    std::lock_guard lock(w.mu);
    w.ec = ec;
    w.reply = r;
    w.done = true;
    w.cv.notify_one();
  });
  if (!w.inline_done) {
    std::unique_lock lock(w.mu);
    w.cv.wait(lock, [&] { return w.done; });
  }
  out = w.reply;
  return w.ec;
}

std::error_code slot_step_blocking(backend& b, std::string_view key, const slot_request& request,
                                   slot_reply& out) {
  return await_slot_reply([&](slot_handler h) { b.async_slot(key, request, std::move(h)); }, out);
}

}  // namespace sluice::detail
