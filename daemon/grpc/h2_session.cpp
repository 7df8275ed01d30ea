#include "grpc/h2_session.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace sluice::daemon::grpc {
namespace {

constexpr std::size_t prefix_bytes = 5;  // compressed flag + big-endian length

nghttp2_nv nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

std::uint32_t message_length(std::string_view prefixed) {
  const auto b = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(prefixed[i]));
  };
  return b(1) << 24 | b(2) << 16 | b(3) << 8 | b(4);
}

}  // namespace

std::string percent_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const unsigned char c : s) {
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  return out;
}

std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view v) {
  if (v.size() < 2 || v.size() > 9) return std::nullopt;
  std::int64_t n = 0;
  for (const char c : v.substr(0, v.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  std::int64_t unit_ns = 0;
  switch (v.back()) {
    case 'H':
      unit_ns = 3'600'000'000'000;
      break;
    case 'M':
      unit_ns = 60'000'000'000;
      break;
    case 'S':
      unit_ns = 1'000'000'000;
      break;
    case 'm':
      unit_ns = 1'000'000;
      break;
    case 'u':
      unit_ns = 1'000;
      break;
    case 'n':
      unit_ns = 1;
      break;
    default:
      return std::nullopt;
  }
  // 99999999H does not fit in nanoseconds (nor does a deadline that far): about 31 years
  // is forever enough.
  constexpr std::int64_t max_ns = 1'000'000'000'000'000'000;
  return std::chrono::nanoseconds{n > max_ns / unit_ns ? max_ns : n * unit_ns};
}

struct h2_session::stream {
  enum class state : std::uint8_t { receiving, dispatched, answered };
  std::int32_t id = 0;
  state st = state::receiving;
  std::string method, path, content_type;
  std::optional<std::chrono::nanoseconds> timeout;
  std::size_t header_bytes = 0;
  std::string body;      // as received: prefix and message
  std::string response;  // an OK answer: prefix and message
  std::size_t sent = 0;
  bool has_deadline = false;
  std::multimap<clock::time_point, std::int32_t>::iterator deadline;
};

h2_session::h2_session(const h2_options& opts, call_handler on_call)
    : opts_(opts), on_call_(std::move(on_call)) {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &on_data);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &on_stream_close);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    throw std::bad_alloc();
  }
  // Closed streams are kept only for RFC 7540 priorities, which gRPC does not use: a
  // client must not make the server remember every stream it ever opened.
  nghttp2_option_set_no_closed_streams(opt, 1);
  nghttp2_option_set_max_outbound_ack(opt, opts_.max_outbound_ack);
  nghttp2_option_set_max_settings(opt, opts_.max_settings);
  nghttp2_option_set_stream_reset_rate_limit(opt, opts_.stream_reset_burst,
                                             opts_.stream_reset_rate);
  nghttp2_option_set_max_continuations(opt, opts_.max_continuations);
  const int rc = nghttp2_session_server_new2(&session_, cbs, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rc != 0) throw std::bad_alloc();
  const std::array<nghttp2_settings_entry, 2> settings{{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, opts_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(opts_.max_header_list_bytes)},
  }};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
}

h2_session::~h2_session() { nghttp2_session_del(session_); }

h2_session::stream* h2_session::find(std::int32_t id) {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second.get();
}

bool h2_session::receive(const std::uint8_t* data, std::size_t size, clock::time_point now) {
  if (failed_) return false;
  now_ = now;
  const auto rv = nghttp2_session_mem_recv(session_, data, size);
  dispatch_ready();
  if (rv < 0) {
    // A flood (SETTINGS, PING or RST_STREAM acks the client does not read), a bad preface
    // or a callback failure: nghttp2 cannot go on. Say why in a GOAWAY and end.
    failed_ = true;
    nghttp2_session_terminate_session(
        session_, rv == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
    return false;
  }
  return true;
}

bool h2_session::take_output(std::string& out, std::size_t limit) {
  while (out.size() < limit) {
    const std::uint8_t* data = nullptr;
    const auto n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      failed_ = true;
      return false;
    }
    if (n == 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
  return true;
}

bool h2_session::alive() const {
  return nghttp2_session_want_read(session_) != 0 || nghttp2_session_want_write(session_) != 0;
}

void h2_session::shutdown() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void h2_session::terminate(std::uint32_t error) {
  nghttp2_session_terminate_session(session_, error);
}

void h2_session::set_deadline(stream& s, std::optional<clock::time_point> at) {
  if (s.has_deadline) deadlines_.erase(s.deadline);
  s.has_deadline = at.has_value();
  if (at) s.deadline = deadlines_.emplace(*at, s.id);
}

std::optional<h2_session::clock::time_point> h2_session::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

void h2_session::expire(clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const auto id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto* s = find(id);
    if (s == nullptr) continue;
    s->has_deadline = false;
    if (s->st == stream::state::receiving) {
      // A request that trickles in (or never ends) holds a stream slot: not for longer than
      // request_timeout.
      s->st = stream::state::answered;
      s->body = std::string();
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    } else if (s->st == stream::state::dispatched) {
      answer(id, status_code::deadline_exceeded, "Deadline Exceeded");
    } else {
      // Answered early, and the request never ended.
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
  }
}

void h2_session::answer(std::int32_t stream_id, status_code code, std::string_view message,
                        std::string_view response) {
  auto* s = find(stream_id);
  if (s == nullptr || s->st == stream::state::answered) return;
  // Answered before its request ended (too large): the request timeout still applies, so
  // a client cannot hold the stream by never ending it.
  if (s->st != stream::state::receiving) set_deadline(*s, std::nullopt);
  s->st = stream::state::answered;
  s->body = std::string();  // no longer needed: free it while the answer is sent
  const std::string_view content_type = "application/grpc";
  if (code == status_code::ok) {
    s->response.resize(prefix_bytes + response.size());
    const auto n = static_cast<std::uint32_t>(response.size());
    s->response[0] = 0;
    s->response[1] = static_cast<char>(n >> 24);
    s->response[2] = static_cast<char>(n >> 16);
    s->response[3] = static_cast<char>(n >> 8);
    s->response[4] = static_cast<char>(n);
    std::memcpy(s->response.data() + prefix_bytes, response.data(), response.size());
    const std::array<nghttp2_nv, 2> headers{nv(":status", "200"), nv("content-type", content_type)};
    nghttp2_data_provider body{};
    body.source.ptr = s;
    body.read_callback = &read_response;
    nghttp2_submit_response(session_, stream_id, headers.data(), headers.size(), &body);
    return;
  }
  // Trailers-only: one HEADERS frame with the status, ending the stream.
  const auto status = std::to_string(static_cast<int>(code));
  const auto encoded = percent_encode(message);
  const std::array<nghttp2_nv, 4> headers{nv(":status", "200"), nv("content-type", content_type),
                                          nv("grpc-status", status), nv("grpc-message", encoded)};
  nghttp2_submit_response(session_, stream_id, headers.data(), headers.size(), nullptr);
}

void h2_session::respond_http(stream& s, const char* status) {
  s.st = stream::state::answered;
  set_deadline(s, std::nullopt);
  s.body = std::string();
  const std::array<nghttp2_nv, 1> headers{nv(":status", status)};
  nghttp2_submit_response(session_, s.id, headers.data(), headers.size(), nullptr);
}

// Validates a request whose last frame came, as gRPC servers do: the HTTP method and
// content-type first (answered in HTTP), then exactly one uncompressed message.
void h2_session::request_complete(stream& s) {
  if (s.st != stream::state::receiving) return;
  if (s.method != "POST") return respond_http(s, "405");
  if (!s.content_type.starts_with("application/grpc")) return respond_http(s, "415");
  if (s.body.size() < prefix_bytes || message_length(s.body) != s.body.size() - prefix_bytes) {
    return answer(s.id, status_code::internal, "grpc: malformed request message");
  }
  if (s.body[0] != 0) {
    return answer(s.id, status_code::unimplemented,
                  "grpc: compressed request messages are not supported");
  }
  s.st = stream::state::dispatched;
  std::optional<clock::time_point> deadline;
  if (s.timeout) deadline = now_ + std::chrono::duration_cast<clock::duration>(*s.timeout);
  set_deadline(s, deadline);
  ready_.push_back(s.id);
}

void h2_session::dispatch_ready() {
  auto ready = std::move(ready_);
  ready_.clear();
  for (const auto id : ready) {
    // Reset after its last frame, within the same read: never decided.
    auto* s = find(id);
    if (s == nullptr || s->st != stream::state::dispatched) continue;
    std::optional<clock::time_point> deadline;
    if (s->has_deadline) deadline = s->deadline->first;
    on_call_(h2_call{id, s->path, std::string_view(s->body).substr(prefix_bytes), deadline});
  }
}

int h2_session::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  auto& me = *static_cast<h2_session*>(self);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto s = std::make_unique<stream>();
  s->id = frame->hd.stream_id;
  auto& ref = *s;
  me.streams_[ref.id] = std::move(s);
  me.set_deadline(ref, me.now_ + me.opts_.request_timeout);
  return 0;
}

int h2_session::on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                          std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                          std::uint8_t, void* self) {
  auto& me = *static_cast<h2_session*>(self);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* s = me.find(frame->hd.stream_id);
  if (s == nullptr) return 0;
  // Counted as the header list size of RFC 9113 (section 6.5.2), across CONTINUATIONs.
  s->header_bytes += namelen + valuelen + 32;
  if (s->header_bytes > me.opts_.max_header_list_bytes) {
    // The stream is reset; nghttp2 decodes (and drops) the rest of the block.
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers: counted only
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":method") {
    s->method = v;
  } else if (n == ":path") {
    s->path = v;
  } else if (n == "content-type") {
    s->content_type = v;
  } else if (n == "grpc-timeout") {
    s->timeout = parse_grpc_timeout(v);
  }
  return 0;
}

int h2_session::on_data(nghttp2_session*, std::uint8_t, std::int32_t stream_id,
                        const std::uint8_t* data, std::size_t len, void* self) {
  auto& me = *static_cast<h2_session*>(self);
  auto* s = me.find(stream_id);
  // Data after an early answer (too large, timed out) is dropped: flow control still
  // credits it, so the client can finish sending, and nothing is kept.
  if (s == nullptr || s->st != stream::state::receiving) return 0;
  const auto max = me.opts_.max_message_bytes;
  const auto have = s->body.size();
  // Refused as soon as the prefix announces too much, or more comes than it said.
  std::size_t declared = 0;
  if (have + len >= prefix_bytes) {
    std::array<char, prefix_bytes> prefix{};
    for (std::size_t i = 0; i < prefix_bytes; ++i) {
      prefix[i] = i < have ? s->body[i] : static_cast<char>(data[i - have]);
    }
    declared = message_length(std::string_view(prefix.data(), prefix.size()));
  }
  if (declared > max || have + len > max + prefix_bytes) {
    me.answer(stream_id, status_code::resource_exhausted,
              "grpc: received message larger than max (" +
                  std::to_string(std::max<std::size_t>(declared, have + len - prefix_bytes)) +
                  " vs. " + std::to_string(max) + ")");
    return 0;
  }
  s->body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int h2_session::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  auto& me = *static_cast<h2_session*>(self);
  if (frame->hd.type == NGHTTP2_SETTINGS) me.preface_ = true;
  if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    if (auto* s = me.find(frame->hd.stream_id)) me.request_complete(*s);
  }
  return 0;
}

int h2_session::on_stream_close(nghttp2_session*, std::int32_t stream_id, std::uint32_t,
                                void* self) {
  auto& me = *static_cast<h2_session*>(self);
  const auto it = me.streams_.find(stream_id);
  if (it == me.streams_.end()) return 0;
  if (it->second->has_deadline) me.deadlines_.erase(it->second->deadline);
  me.streams_.erase(it);
  return 0;
}

ssize_t h2_session::read_response(nghttp2_session* session, std::int32_t stream_id,
                                  std::uint8_t* buf, std::size_t length, std::uint32_t* flags,
                                  nghttp2_data_source* source, void*) {
  auto& s = *static_cast<stream*>(source->ptr);
  const auto n = std::min(length, s.response.size() - s.sent);
  std::memcpy(buf, s.response.data() + s.sent, n);
  s.sent += n;
  if (s.sent == s.response.size()) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    // The status goes in trailers, which end the stream.
    const std::array<nghttp2_nv, 1> trailers{nv("grpc-status", "0")};
    if (nghttp2_submit_trailer(session, stream_id, trailers.data(), trailers.size()) == 0) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  }
  return static_cast<ssize_t>(n);
}

}  // namespace sluice::daemon::grpc
