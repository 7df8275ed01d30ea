// sluice_bench_rls's `h2` transport: gRPC's wire format spoken over nghttp2, on one thread
// for every connection (as h2load -t 1). A call is an HTTP/2 stream: HEADERS (POST to the
// method's path, content-type application/grpc, te: trailers, grpc-timeout) and one DATA
// frame of the 5-byte message prefix (not compressed, big-endian length) and the protobuf
// request; the answer is HEADERS (:status 200), the response message in DATA, and trailers
// with grpc-status (or HEADERS alone carrying grpc-status: "trailers-only", for errors).
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "rls_transport.hpp"

namespace sluice::bench {
namespace {

namespace asio = boost::asio;
namespace rls = ::envoy::service::ratelimit::v3;
using tcp = asio::ip::tcp;

constexpr std::string_view method_path =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

// One call in flight: its request body, and what its answer brought so far.
struct pending_call {
  std::string body;
  std::size_t sent = 0;
  std::string data;
  int http_status = 0;
  int grpc_status = -1;  // -1: no grpc-status came
  std::string grpc_message;
  call_done done;
};

std::string grpc_frame(const rls::RateLimitRequest& req) {
  const auto n = req.ByteSizeLong();
  std::string out(5 + n, '\0');
  out[1] = static_cast<char>((n >> 24) & 0xff);
  out[2] = static_cast<char>((n >> 16) & 0xff);
  out[3] = static_cast<char>((n >> 8) & 0xff);
  out[4] = static_cast<char>(n & 0xff);
  req.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out.data() + 5));
  return out;
}

call_result result_of(const pending_call& c, std::uint32_t h2_error) {
  call_result r;
  if (h2_error != NGHTTP2_NO_ERROR) {
    r.error = "HTTP/2 stream reset (error " + std::to_string(h2_error) + ")";
  } else if (c.http_status != 200) {
    r.error = "HTTP status " + std::to_string(c.http_status);
  } else if (c.grpc_status != 0) {
    r.error = c.grpc_status < 0
                  ? "no grpc-status"
                  : "grpc-status " + std::to_string(c.grpc_status) + ": " + c.grpc_message;
  } else if (c.data.size() < 5 || c.data[0] != 0) {
    r.error = "no uncompressed response message";
  } else {
    rls::RateLimitResponse resp;
    if (!resp.ParseFromArray(c.data.data() + 5, static_cast<int>(c.data.size() - 5))) {
      r.error = "response does not parse";
    } else {
      r.ok = true;
      r.over_limit = resp.overall_code() == rls::RateLimitResponse::OVER_LIMIT;
    }
  }
  return r;
}

int to_int(std::string_view s) {
  int v = -1;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// One HTTP/2 connection. Everything but the constructor runs on the io_context's thread.
class h2_connection {
 public:
  h2_connection(asio::io_context& io, const std::string& host, const std::string& port)
      : sock_(io), authority_(host + ":" + port) {
    tcp::resolver resolver(io);
    asio::connect(sock_, resolver.resolve(host, port));
    sock_.set_option(tcp::no_delay(true));
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &on_close);
    const int rc = nghttp2_session_client_new(&session_, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    if (rc != 0) throw std::runtime_error("nghttp2_session_client_new failed");
    // Room for every stream's answers without waiting for WINDOW_UPDATEs.
    const std::array<nghttp2_settings_entry, 2> settings{{
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 10'000},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    }};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 1 << 24);
  }

  ~h2_connection() {
    nghttp2_session_del(session_);
    for (auto* c : live_) delete c;
  }
  h2_connection(const h2_connection&) = delete;
  h2_connection& operator=(const h2_connection&) = delete;

  void start() {
    flush();
    read();
  }

  void submit(std::unique_ptr<pending_call> c) {
    if (broken_) return fail(std::move(c), broken_why_);
    auto nv = [](std::string_view name, std::string_view value) {
      return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                        reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())),
                        name.size(), value.size(), NGHTTP2_NV_FLAG_NONE};
    };
    const std::array<nghttp2_nv, 7> headers{
        nv(":method", "POST"),
        nv(":scheme", "http"),
        nv(":path", method_path),
        nv(":authority", authority_),
        nv("content-type", "application/grpc"),
        nv("te", "trailers"),
        nv("grpc-timeout", "5S"),
    };
    nghttp2_data_provider body{};
    body.source.ptr = c.get();
    body.read_callback = &read_body;
    const auto id =
        nghttp2_submit_request(session_, nullptr, headers.data(), headers.size(), &body, c.get());
    if (id < 0) return fail(std::move(c), nghttp2_strerror(id));
    live_.insert(c.release());  // the stream's now: freed in on_close, or by broken()
    // Inside a read, the answers' next calls go out together once it is processed.
    if (!reading_) flush();
  }

 private:
  static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* c = static_cast<pending_call*>(source->ptr);
    const auto n = std::min(length, c->body.size() - c->sent);
    std::memcpy(buf, c->body.data() + c->sent, n);
    c->sent += n;
    if (c->sent == c->body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int on_header(nghttp2_session* s, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t, void*) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto* c =
        static_cast<pending_call*>(nghttp2_session_get_stream_user_data(s, frame->hd.stream_id));
    if (c == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      c->http_status = to_int(v);
    } else if (n == "grpc-status") {
      c->grpc_status = to_int(v);
    } else if (n == "grpc-message") {
      c->grpc_message = v;
    }
    return 0;
  }

  static int on_data(nghttp2_session* s, std::uint8_t, std::int32_t stream_id,
                     const std::uint8_t* data, std::size_t len, void*) {
    auto* c = static_cast<pending_call*>(nghttp2_session_get_stream_user_data(s, stream_id));
    if (c != nullptr) c->data.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  // The answers are handed out after the read is processed: a handler that sends its next
  // call must not re-enter nghttp2_session_mem_recv.
  static int on_close(nghttp2_session* s, std::int32_t stream_id, std::uint32_t error, void* self) {
    auto* c = static_cast<pending_call*>(nghttp2_session_get_stream_user_data(s, stream_id));
    if (c == nullptr) return 0;
    nghttp2_session_set_stream_user_data(s, stream_id, nullptr);
    auto& conn = *static_cast<h2_connection*>(self);
    conn.live_.erase(c);
    conn.answered_.push_back({std::unique_ptr<pending_call>(c), error});
    return 0;
  }

  void read() {
    sock_.async_read_some(asio::buffer(rbuf_), [this](boost::system::error_code ec, std::size_t n) {
      if (ec) return broken("connection lost: " + ec.message());
      reading_ = true;
      const auto used = nghttp2_session_mem_recv(session_, rbuf_.data(), n);
      hand_out();
      reading_ = false;
      if (used < 0) {
        return broken(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(used)));
      }
      flush();
      read();
    });
  }

  void hand_out() {
    auto answered = std::move(answered_);
    answered_.clear();
    for (auto& [c, error] : answered) c->done(result_of(*c, error));
  }

  // Streams that nghttp2 closes while sending (refused after the server's GOAWAY): answered
  // from the io_context, not from inside the send that a handler's next call may be in.
  void hand_out_later() {
    if (answered_.empty() || hand_out_posted_) return;
    hand_out_posted_ = true;
    asio::post(sock_.get_executor(), [this] {
      hand_out_posted_ = false;
      hand_out();
      flush();
    });
  }

  // Sends what nghttp2 has queued: one write at a time, the rest gathered behind it.
  void flush() {
    if (broken_) return;
    for (;;) {
      const std::uint8_t* data = nullptr;
      const auto n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) return broken(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
      if (n == 0) break;
      queued_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    hand_out_later();
    if (writing_ || queued_.empty()) return;
    writing_ = true;
    in_write_.swap(queued_);
    asio::async_write(sock_, asio::buffer(in_write_),
                      [this](boost::system::error_code ec, std::size_t) {
                        writing_ = false;
                        in_write_.clear();
                        if (ec) return broken("write failed: " + ec.message());
                        flush();
                      });
  }

  // Every call in flight, and every later one, fails with `why`; the session is not driven
  // any more (nghttp2_session_del frees its streams without calling back).
  void broken(std::string why) {
    if (broken_) return;
    broken_ = true;
    broken_why_ = std::move(why);
    boost::system::error_code ignored;
    sock_.close(ignored);
    auto live = std::move(live_);
    live_.clear();
    for (auto* c : live) fail(std::unique_ptr<pending_call>(c), broken_why_);
    hand_out_later();
  }

  // Posted, not inline: a closed loop that sends its next call from the answer must not
  // recurse while the connection is down.
  void fail(std::unique_ptr<pending_call> c, std::string why) {
    asio::post(sock_.get_executor(), [c = std::move(c), why = std::move(why)] {
      call_result r;
      r.error = why;
      c->done(r);
    });
  }

  tcp::socket sock_;
  std::string authority_;
  nghttp2_session* session_ = nullptr;
  std::array<std::uint8_t, 64 * 1024> rbuf_{};
  std::string queued_;
  std::string in_write_;
  bool writing_ = false;
  bool reading_ = false;
  bool hand_out_posted_ = false;
  bool broken_ = false;
  std::string broken_why_;
  std::unordered_set<pending_call*> live_;  // submitted, not yet closed
  std::vector<std::pair<std::unique_ptr<pending_call>, std::uint32_t>> answered_;
};

class h2_transport final : public rls_transport {
 public:
  h2_transport(const std::string& target, int channels) {
    const auto colon = target.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("target must be HOST:PORT: " + target);
    const auto host = target.substr(0, colon);
    const auto port = target.substr(colon + 1);
    try {
      for (int c = 0; c < channels; ++c)
        conns_.push_back(std::make_unique<h2_connection>(io_, host, port));
    } catch (const boost::system::system_error& e) {
      throw std::runtime_error("no HTTP/2 connection to " + target + ": " + e.what());
    }
    for (auto& c : conns_) c->start();
    thread_ = std::thread([this] { io_.run(); });
  }

  ~h2_transport() override {
    work_.reset();
    io_.stop();
    thread_.join();
  }

  void call(std::size_t channel, const rls::RateLimitRequest& req, call_done done) override {
    auto c = std::make_unique<pending_call>();
    c->body = grpc_frame(req);
    c->done = std::move(done);
    auto* conn = conns_[channel % conns_.size()].get();
    asio::dispatch(io_, [conn, c = std::move(c)]() mutable { conn->submit(std::move(c)); });
  }

 private:
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  std::vector<std::unique_ptr<h2_connection>> conns_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<rls_transport> make_h2_transport(const std::string& target, int channels) {
  return std::make_unique<h2_transport>(target, channels);
}

}  // namespace sluice::bench
