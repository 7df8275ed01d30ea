#pragma once
// The bounds of one gRPC connection, written once: the config reads them (`envoy_rls:`,
// docs/ENVOY.md), the HTTP/2 session and the connection apply them. No I/O, no nghttp2.
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace sluice::daemon::grpc {

/// The bounds of one connection (the `envoy_rls:` options of docs/ENVOY.md).
struct h2_options {
  std::uint32_t max_concurrent_streams = 100;  ///< SETTINGS_MAX_CONCURRENT_STREAMS
  /// A request's header list (name + value + 32 per field, as RFC 9113 counts it),
  /// across its CONTINUATION frames; over it the stream is reset.
  std::size_t max_header_list_bytes = 8 * 1024;
  /// CONTINUATION frames after one HEADERS; one more ends the connection (GOAWAY).
  std::size_t max_continuations = 8;
  /// A request message; over it the call is answered RESOURCE_EXHAUSTED.
  std::size_t max_message_bytes = 64 * 1024;
  /// Streams the client may reset (RST_STREAM) in a burst, and per second after it; past
  /// that the connection ends with GOAWAY (nghttp2's rate limiter).
  std::uint64_t stream_reset_burst = 1000;
  std::uint64_t stream_reset_rate = 33;
  /// From a stream's HEADERS to the end of its request: a stream still incomplete then is
  /// reset (CANCEL).
  std::chrono::milliseconds request_timeout{10'000};
  /// Control frames (SETTINGS and PING acks, RST_STREAM) queued for a client that does not
  /// read them; past it the connection ends (nghttp2's flood protection).
  std::size_t max_outbound_ack = 1000;
  /// Entries in one SETTINGS frame.
  std::size_t max_settings = 32;
  bool operator==(const h2_options&) const = default;
};

/// The bounds of a connection beyond its HTTP/2 session's.
struct connection_options {
  h2_options h2;
  /// From accept to the client's preface (its first SETTINGS), TLS handshake included.
  std::chrono::milliseconds handshake_timeout{5'000};
  /// With no stream open for this long, the connection ends (GOAWAY); also how long one
  /// write may wait for a client that does not read.
  std::chrono::milliseconds idle_timeout{300'000};
  /// Output buffered for one connection: past it, its requests are not read until the
  /// client takes its answers.
  std::size_t max_output_bytes = 256 * 1024;
  bool operator==(const connection_options&) const = default;
};

}  // namespace sluice::daemon::grpc
