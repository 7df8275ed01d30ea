// sluiced's HTTP/2 gRPC server (daemon/grpc/h2_session) on arbitrary frames: a client preface,
// then the input's bytes, in chunks, into one session whose call handler answers at once
// (or not at all, or with an error). Invariants: no crash; no more streams open than
// SETTINGS_MAX_CONCURRENT_STREAMS; no call with a message over the limit; output bounded by
// a function of the input (no amplification); every call with a deadline is answered once
// its time has passed.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "grpc/h2_session.hpp"

namespace {

using namespace std::chrono_literals;
namespace grpc = sluice::daemon::grpc;

constexpr std::string_view magic = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::string_view empty_settings{"\0\0\0\x04\0\0\0\0\0", 9};
constexpr std::size_t canned_size = 24;

}  // namespace

// Input: a control byte (bits 0-1: answer calls OK with a canned response, with an error,
// or not at all; bit 2: tight limits; bits 3-7: chunk size - 1, in 16-byte steps), then
// frame bytes after the preface.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto control = data[0];
  const auto mode = control & 3;
  grpc::h2_options opts;
  if (control & 4) {
    opts.max_concurrent_streams = 4;
    opts.max_header_list_bytes = 1024;
    opts.max_continuations = 2;
    opts.max_message_bytes = 64;
    opts.stream_reset_burst = 4;
    opts.stream_reset_rate = 1;
  }
  const std::size_t chunk = (static_cast<std::size_t>(control >> 3) + 1) * 16;
  const std::string canned(canned_size, 'r');
  std::size_t calls = 0;
  grpc::h2_session* self = nullptr;
  grpc::h2_session session(opts, [&](const grpc::h2_call& c) {
    ++calls;
    SLUICE_FUZZ_CHECK(c.message.size() <= opts.max_message_bytes);
    SLUICE_FUZZ_CHECK(c.stream_id > 0 && c.stream_id % 2 == 1);
    if (mode == 0) self->answer(c.stream_id, grpc::status_code::ok, {}, canned);
    if (mode == 1) self->answer(c.stream_id, grpc::status_code::invalid_argument, "bad \xff");
  });
  self = &session;

  std::string input(magic);
  input += empty_settings;
  input.append(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  auto now = t0;
  std::size_t output = 0;
  bool ok = true;
  for (std::size_t at = 0; at < input.size() && ok; at += chunk) {
    const auto n = std::min(chunk, input.size() - at);
    ok = session.receive(reinterpret_cast<const std::uint8_t*>(input.data() + at), n, now);
    SLUICE_FUZZ_CHECK(session.open_streams() <= opts.max_concurrent_streams);
    std::string out;
    session.take_output(out, 1 << 20);
    output += out.size();
    now += 1ms;
    session.expire(now);
  }
  // Time passes: every deadline (grpc-timeout, capped at about 31 years; and the request
  // timeout) is due.
  session.expire(now + std::chrono::hours{24 * 365 * 40});
  std::string out;
  session.take_output(out, 1 << 20);
  output += out.size();
  SLUICE_FUZZ_CHECK(!session.next_deadline().has_value());
  // About 100 bytes of headers, data and trailers per call at most (HPACK keeps repeated
  // headers short), and acks the size of what they ack: no amplification beyond that.
  SLUICE_FUZZ_CHECK(output <= 1024 + 16 * input.size() + calls * (canned_size + 128));
  return 0;
}
