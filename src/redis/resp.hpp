#pragma once
// RESP through hiredis, and nothing else from it: RAII owners for hiredis objects, the
// command formatter and the reply reader. Sockets and timers are Asio's (connection.hpp).
#include <hiredis/hiredis.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace sluice::redis {

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
/// One parsed reply (and, for arrays, its elements).
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

/// Appends one command in RESP (an array of bulk strings) to `out`. Binary-safe.
/// Throws std::bad_alloc when hiredis cannot allocate.
void append_command(std::string& out, std::initializer_list<std::string_view> args);
/// The same, for a dynamic argument list.
void append_command(std::string& out, const std::string_view* args, std::size_t count);

/// The text of a reply that is a bulk string, status or error; empty otherwise.
std::string_view reply_text(const redisReply& r) noexcept;
/// True when `r` is an error reply starting with `prefix` (e.g. "NOSCRIPT").
bool is_error(const redisReply& r, std::string_view prefix = {}) noexcept;

/// An incremental RESP parser: feed bytes as they arrive, take complete replies out.
/// Not thread-safe (one per connection).
class reply_reader {
 public:
  reply_reader();
  /// Adds received bytes. False when the reader is out of memory.
  bool feed(const char* data, std::size_t size) noexcept;
  enum class status { reply, incomplete, protocol_error };
  /// Takes the next complete reply into `out`. After protocol_error the stream is
  /// unusable; error_text() says why.
  status next(reply_ptr& out) noexcept;
  std::string_view error_text() const noexcept;

 private:
  struct deleter {
    void operator()(redisReader* r) const noexcept { redisReaderFree(r); }
  };
  std::unique_ptr<redisReader, deleter> reader_;
};

}  // namespace sluice::redis
