#pragma once
// The server side of unary gRPC over HTTP/2, without I/O: bytes received go in (receive),
// bytes to send come out (take_output), and each complete call is handed to a callback and
// answered later by its stream id (answer). nghttp2 (Debian's 1.52 with the fixes for rapid
// reset and CONTINUATION floods) does the framing, HPACK and flow control; this class adds
// gRPC's rules (the 5-byte message prefix, grpc-timeout, trailers, trailers-only errors) and
// the bounds one connection may hold of the daemon. Time is passed in, never read, so unit
// tests and the fuzz target drive it with frames alone.
#include <nghttp2/nghttp2.h>

#include "grpc/options.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sluice::daemon::grpc {

/// gRPC status codes; the numbers are the wire's.
enum class status_code : std::uint8_t {
  ok = 0,
  cancelled = 1,
  unknown = 2,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  resource_exhausted = 8,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
};

/// `s` as grpc-message carries it: bytes outside printable ASCII, and '%', as %XX.
std::string percent_encode(std::string_view s);

/// A grpc-timeout value ("100m", "5S", ... at most 8 digits and a unit), or std::nullopt
/// when it is not one.
std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view v);

/// A complete call, as handed to the call handler.
struct h2_call {
  std::int32_t stream_id = 0;
  std::string_view path;     ///< ":path", e.g. "/grpc.health.v1.Health/Check"
  std::string_view message;  ///< the request message (no prefix); valid during the call only
  /// From grpc-timeout and the time the call was received; a call not answered by then is
  /// answered DEADLINE_EXCEEDED by expire() (a later answer is dropped).
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

/// Not thread-safe: one connection's thread drives it.
class h2_session {
 public:
  using clock = std::chrono::steady_clock;
  /// Called once per well-formed call (after receive() has processed the bytes that
  /// completed it, never inside nghttp2); may answer inline.
  using call_handler = std::function<void(const h2_call&)>;

  h2_session(const h2_options& opts, call_handler on_call);
  ~h2_session();
  h2_session(const h2_session&) = delete;
  h2_session& operator=(const h2_session&) = delete;

  /// Processes bytes from the client (preface, frames). Returns false when the connection
  /// must end (a protocol error or a flood): what take_output gives then is the GOAWAY.
  bool receive(const std::uint8_t* data, std::size_t size, clock::time_point now);

  /// Appends the bytes to send to `out` until it holds about `limit` bytes (it may pass it
  /// by one frame). Returns false on an internal error of nghttp2 (the connection ends).
  bool take_output(std::string& out, std::size_t limit);

  /// Answers call `stream_id`: OK with the serialized `response`, or `code` with `message`
  /// (trailers-only). A stream that is gone (reset, timed out, answered) is ignored.
  void answer(std::int32_t stream_id, status_code code, std::string_view message,
              std::string_view response = {});

  /// Answers DEADLINE_EXCEEDED to the calls whose deadline is past and resets the streams
  /// whose request did not complete within request_timeout.
  void expire(clock::time_point now);
  /// The earliest deadline of expire(), if any.
  std::optional<clock::time_point> next_deadline() const;

  /// Graceful end: GOAWAY with the last stream id processed; streams open finish.
  void shutdown();
  /// Ends now: GOAWAY (`error`, e.g. NGHTTP2_NO_ERROR or NGHTTP2_ENHANCE_YOUR_CALM).
  void terminate(std::uint32_t error);

  /// False once the connection has nothing more to read or write (after a GOAWAY and its
  /// streams, or a fatal error): close it once the output is written.
  bool alive() const;
  /// True once the client's preface (the magic and its first SETTINGS) has come.
  bool preface_received() const noexcept { return preface_; }
  /// Streams open (request being received, or call awaiting its answer).
  std::size_t open_streams() const noexcept { return streams_.size(); }

 private:
  struct stream;
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame*, void*);
  static int on_header(nghttp2_session*, const nghttp2_frame*, const std::uint8_t*, std::size_t,
                       const std::uint8_t*, std::size_t, std::uint8_t, void*);
  static int on_data(nghttp2_session*, std::uint8_t, std::int32_t, const std::uint8_t*, std::size_t,
                     void*);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame*, void*);
  static int on_stream_close(nghttp2_session*, std::int32_t, std::uint32_t, void*);
  static ssize_t read_response(nghttp2_session*, std::int32_t, std::uint8_t*, std::size_t,
                               std::uint32_t*, nghttp2_data_source*, void*);

  stream* find(std::int32_t id);
  void request_complete(stream& s);
  void set_deadline(stream& s, std::optional<clock::time_point> at);
  void respond_http(stream& s, const char* status);
  void dispatch_ready();

  h2_options opts_;
  call_handler on_call_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<std::int32_t, std::unique_ptr<stream>> streams_;
  std::multimap<clock::time_point, std::int32_t> deadlines_;
  // Calls completed during one receive(), dispatched after nghttp2 returns.
  std::vector<std::int32_t> ready_;
  clock::time_point now_{};
  bool failed_ = false;
  bool preface_ = false;
};

}  // namespace sluice::daemon::grpc
