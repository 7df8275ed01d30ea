#pragma once
/// HTTP/2 frames by hand, for tests that play a gRPC client (well-behaved or hostile) against
/// sluiced's HTTP/2 server: frames are built byte by byte (so a test can send what no client
/// library would: CONTINUATION floods, resets right after HEADERS), header blocks with
/// nghttp2's HPACK encoder, and the server's frames are parsed back and their header blocks
/// decoded. Header only; the user links libnghttp2. Not thread-safe.
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::test::h2 {

inline constexpr std::string_view client_magic = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum frame_type : std::uint8_t {
  data = 0x0,
  headers = 0x1,
  rst_stream = 0x3,
  settings = 0x4,
  ping = 0x6,
  goaway = 0x7,
  window_update = 0x8,
  continuation = 0x9,
};
enum frame_flag : std::uint8_t {
  end_stream = 0x1,
  ack = 0x1,
  end_headers = 0x4,
};

struct frame {
  std::uint8_t type = 0;
  std::uint8_t flags = 0;
  std::int32_t stream = 0;
  std::string payload;
};

inline std::string u32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

inline std::string frame_bytes(std::uint8_t type, std::uint8_t flags, std::int32_t stream,
                               std::string_view payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string out{static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n),
                  static_cast<char>(type), static_cast<char>(flags)};
  out += u32(static_cast<std::uint32_t>(stream) & 0x7fffffffu);
  out += payload;
  return out;
}

/// The client preface: the magic and an empty SETTINGS frame.
inline std::string preface() { return std::string(client_magic) + frame_bytes(settings, 0, 0, ""); }

inline std::string settings_ack() { return frame_bytes(settings, ack, 0, ""); }

inline std::string rst(std::int32_t stream, std::uint32_t error = NGHTTP2_CANCEL) {
  return frame_bytes(rst_stream, 0, stream, u32(error));
}

/// A gRPC message: the 5-byte prefix (not compressed) and `message`.
inline std::string grpc_message(std::string_view message) {
  return std::string(1, '\0') + u32(static_cast<std::uint32_t>(message.size())) +
         std::string(message);
}

/// One literal header field, not indexed (no HPACK state): for blocks built by hand.
inline std::string literal_field(std::string_view name, std::string_view value) {
  auto length = [](std::size_t n) {
    std::string out;
    if (n < 127) return std::string(1, static_cast<char>(n));
    out += static_cast<char>(127);
    n -= 127;
    while (n >= 128) {
      out += static_cast<char>((n & 0x7f) | 0x80);
      n >>= 7;
    }
    out += static_cast<char>(n);
    return out;
  };
  return std::string(1, '\0') + length(name.size()) + std::string(name) + length(value.size()) +
         std::string(value);
}

using header_list = std::vector<std::pair<std::string, std::string>>;

/// The request headers of a gRPC call to `path` (and `extra` ones).
inline header_list grpc_request_headers(std::string_view path, const header_list& extra = {}) {
  header_list h{{":method", "POST"},
                {":scheme", "http"},
                {":path", std::string(path)},
                {":authority", "sluice.test"},
                {"content-type", "application/grpc"},
                {"te", "trailers"}};
  h.insert(h.end(), extra.begin(), extra.end());
  return h;
}

/// A client's HPACK state (its encoder) and the server's frames as they come back.
class peer {
 public:
  peer() {
    if (nghttp2_hd_deflate_new(&deflater_, 4096) != 0 || nghttp2_hd_inflate_new(&inflater_) != 0) {
      throw std::runtime_error("nghttp2_hd_*_new failed");
    }
  }
  ~peer() {
    nghttp2_hd_deflate_del(deflater_);
    nghttp2_hd_inflate_del(inflater_);
  }
  peer(const peer&) = delete;
  peer& operator=(const peer&) = delete;

  /// A header block (HPACK, with this peer's encoder state).
  std::string block(const header_list& h) {
    std::vector<nghttp2_nv> nva;
    for (const auto& [n, v] : h) {
      nva.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(n.data())),
                     reinterpret_cast<std::uint8_t*>(const_cast<char*>(v.data())), n.size(),
                     v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    std::string out(nghttp2_hd_deflate_bound(deflater_, nva.data(), nva.size()), '\0');
    const auto n = nghttp2_hd_deflate_hd(deflater_, reinterpret_cast<std::uint8_t*>(out.data()),
                                         out.size(), nva.data(), nva.size());
    if (n < 0) throw std::runtime_error("nghttp2_hd_deflate_hd failed");
    out.resize(static_cast<std::size_t>(n));
    return out;
  }

  /// HEADERS (END_HEADERS; END_STREAM when `end`).
  std::string headers_frame(std::int32_t stream, const header_list& h, bool end = false) {
    return frame_bytes(headers, end_headers | (end ? end_stream : 0), stream, block(h));
  }

  /// A whole unary call: HEADERS, then the message in one DATA frame with END_STREAM.
  std::string call(std::int32_t stream, std::string_view path, std::string_view message,
                   const header_list& extra = {}) {
    return headers_frame(stream, grpc_request_headers(path, extra)) +
           frame_bytes(data, end_stream, stream, grpc_message(message));
  }

  /// Parses what the server sent (in any pieces) into frames().
  void feed(std::string_view bytes) {
    buf_ += bytes;
    std::size_t at = 0;
    while (buf_.size() - at >= 9) {
      const auto b = [&](std::size_t i) { return static_cast<std::uint8_t>(buf_[at + i]); };
      const std::size_t len = b(0) << 16 | b(1) << 8 | b(2);
      if (buf_.size() - at < 9 + len) break;
      frame f;
      f.type = b(3);
      f.flags = b(4);
      f.stream = static_cast<std::int32_t>((b(5) & 0x7f) << 24 | b(6) << 16 | b(7) << 8 | b(8));
      f.payload = buf_.substr(at + 9, len);
      at += 9 + len;
      if (f.type == headers || f.type == continuation) decode(f);
      frames_.push_back(std::move(f));
    }
    buf_.erase(0, at);
  }

  const std::vector<frame>& frames() const { return frames_; }
  /// The headers decoded from each HEADERS frame, by stream, in order.
  const std::map<std::int32_t, std::vector<std::map<std::string, std::string>>>& headers_of()
      const {
    return decoded_;
  }
  /// The last header `name` the server sent on `stream` ("" when none).
  std::string header(std::int32_t stream, const std::string& name) const {
    const auto it = decoded_.find(stream);
    if (it == decoded_.end()) return "";
    for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) {
      if (const auto h = b->find(name); h != b->end()) return h->second;
    }
    return "";
  }
  /// The DATA the server sent on `stream`, concatenated.
  std::string data_of(std::int32_t stream) const {
    std::string out;
    for (const auto& f : frames_) {
      if (f.type == data && f.stream == stream) out += f.payload;
    }
    return out;
  }
  /// The error code of the first frame of `type` (RST_STREAM on `stream`, or GOAWAY), or
  /// -1 when there is none.
  long long error_of(std::uint8_t type, std::int32_t stream = 0) const {
    for (const auto& f : frames_) {
      if (f.type != type || (type == rst_stream && f.stream != stream)) continue;
      const auto& p = f.payload;
      const std::size_t off = type == goaway ? 4 : 0;
      if (p.size() < off + 4) return -1;
      const auto b = [&](std::size_t i) { return static_cast<std::uint8_t>(p[off + i]); };
      return static_cast<long long>(std::uint32_t{b(0)} << 24 | b(1) << 16 | b(2) << 8 | b(3));
    }
    return -1;
  }
  std::size_t count(std::uint8_t type) const {
    std::size_t n = 0;
    for (const auto& f : frames_) n += f.type == type;
    return n;
  }

 private:
  void decode(const frame& f) {
    std::string_view in = f.payload;
    std::map<std::string, std::string> fields;
    for (;;) {
      nghttp2_nv nv{};
      int inflate_flags = 0;
      const bool final = (f.flags & end_headers) != 0;
      const auto n = nghttp2_hd_inflate_hd2(inflater_, &nv, &inflate_flags,
                                            reinterpret_cast<const std::uint8_t*>(in.data()),
                                            in.size(), final ? 1 : 0);
      if (n < 0) throw std::runtime_error("the server's header block does not decode");
      in.remove_prefix(static_cast<std::size_t>(n));
      if (inflate_flags & NGHTTP2_HD_INFLATE_EMIT) {
        fields[std::string(reinterpret_cast<const char*>(nv.name), nv.namelen)] =
            std::string(reinterpret_cast<const char*>(nv.value), nv.valuelen);
      }
      if (inflate_flags & NGHTTP2_HD_INFLATE_FINAL) {
        nghttp2_hd_inflate_end_headers(inflater_);
        break;
      }
      if ((inflate_flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && in.empty()) break;
    }
    decoded_[f.stream].push_back(std::move(fields));
  }

  nghttp2_hd_deflater* deflater_ = nullptr;
  nghttp2_hd_inflater* inflater_ = nullptr;
  std::string buf_;
  std::vector<frame> frames_;
  std::map<std::int32_t, std::vector<std::map<std::string, std::string>>> decoded_;
};

}  // namespace sluice::test::h2
