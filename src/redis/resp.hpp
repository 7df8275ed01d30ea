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
  /// The most elements an array reply may announce; more is a protocol error. hiredis
  /// allocates an array's element pointers when its header arrives, before any element:
  /// unbounded, `*444444440` (13 bytes from a server, or from anything on the path of a
  /// plain redis:// connection) was a 3.5 GB allocation. The longest replies sluice asks
  /// for are a batch of 1000 checks (4000 integers) and CLUSTER SLOTS (at most 16384
  /// ranges).
  static constexpr int max_array_elements = 1 << 16;

  reply_reader();
  // The hiredis reader points back at this object (see max_array_elements).
  reply_reader(const reply_reader&) = delete;
  reply_reader& operator=(const reply_reader&) = delete;
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
  friend struct bounded_reply_functions;
  std::unique_ptr<redisReader, deleter> reader_;
  bool array_too_long_ = false;  // why the last protocol error happened, when set
};

}  // namespace sluice::redis
