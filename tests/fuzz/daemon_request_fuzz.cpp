// sluiced's request handling without sockets: raw request bytes through Beast's parser
// (with sluiced's default limits) into service::handle on the memory backend (the admin
// endpoints on, behind a token file), and the response out through append_wire_response,
// as the connection's session does. Every answer must be exactly one well-formed HTTP/1.x
// response whose JSON bodies parse.
//
// Input: one control byte (bits 0-2 choose the peer, trusted proxy or not; bits 3-4 the
// forwarded_header mode), then the bytes a client sends: requests after the first one
// are pipelined ones. Bytes the parser refuses end the input (sluiced answers those with
// a 400 from its socket code, which is not run here).
#include <sluice/clock.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "config.hpp"
#include "fuzz_check.hpp"
#include "response_wire.hpp"
#include "service.hpp"

namespace {

namespace bhttp = boost::beast::http;
using namespace sluice;
using daemon::http_response;

// A file the config names, written once per process into the temporary directory.
struct removed_at_exit {
  std::filesystem::path path;
  ~removed_at_exit() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};
// The Envoy RLS limits POST /json decides with (envoy_rls.config names this file).
std::string rls_limits_path() {
  static const removed_at_exit file = [] {
    const auto p = std::filesystem::temp_directory_path() /
                   ("sluice-daemon-request-fuzz-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(p) << R"(domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: "/api/*"
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: token_bucket, burst: 2}
  - key: watch
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: user
    rate_limit: {unlimited: true}
)";
    return removed_at_exit{p};
  }();
  return file.path.string();
}

// Rules keyed by ip, header, method, host and path, one of them shadow; the proxies are
// trusted so that X-Forwarded-For, Forwarded and X-Forwarded-Uri are read. The tight
// policy denies the third request of a client within one input (a 429 problem body).
std::string config_yaml(std::string_view forwarded_header) {
  return R"(backend: memory
memory_max_keys: 4096
trusted_proxies: [10.0.0.0/8, "2001:db8::/32", 127.0.0.1]
forwarded_header: )" +
         std::string(forwarded_header) + R"(
ipv6_prefix: 56
policies:
  tight: {capacity: 2, refill_per_second: 0.5}
  wide: {capacity: 1000, refill_per_second: 100}
rules:
  - {name: login, match: {path_prefix: /login, methods: [POST]}, key: ip, policy: tight}
  - {name: api, match: {path_prefix: /api/, hosts: [api.example]}, key: "header:X-API-Key|ip", policy: wide, cost: 3}
  - {name: by-path, key: ip+path, policy: wide}
  - {name: watch, key: "header:X-User-Id+method|host", policy: tight, shadow: true}
envoy_rls:
  listen: 127.0.0.1:0
  config: [)" +
         rls_limits_path() + R"(]
)";
}

// The admin endpoints are on, with the token the corpus' admin_* seeds send: the config
// names a file, written once per process and removed at exit.
constexpr std::string_view admin_token = "s3cr3t-admin-token-0123456789";
std::string admin_token_file() {
  static const removed_at_exit file = [] {
    const auto p = std::filesystem::temp_directory_path() /
                   ("sluice-fuzz-admin-token-" + std::to_string(::getpid()));
    std::ofstream(p, std::ios::binary | std::ios::trunc) << admin_token << "\n";
    return removed_at_exit{p};
  }();
  return file.path.string();
}

// The config of each forwarded_header mode, parsed once.
const daemon::config& config_for(unsigned mode) {
  static const std::array<daemon::config, 3> configs = [] {
    std::array<daemon::config, 3> c;
    const char* modes[] = {"x-forwarded-for", "forwarded", "forwarded-then-x-forwarded-for"};
    for (int i = 0; i < 3; ++i) {
      c[i] = daemon::parse_config(
          config_yaml(modes[i]) + "admin: {token_file: " + admin_token_file() + "}\n", "fuzz.yaml");
    }
    return c;
  }();
  return configs[mode % 3];
}

// What a session's remote_endpoint() can say: trusted proxies (v4, v6, v4-mapped,
// loopback), other clients, and nothing (the endpoint could not be read).
constexpr std::array<const char*, 8> peers = {
    "10.0.0.1", "2001:db8::7", "::ffff:10.1.2.3", "127.0.0.1", "192.0.2.99", "2001:db9::1", "::1",
    ""};

bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool iequals(std::string_view a, std::string_view b) {
  return boost::beast::iequals({a.data(), a.size()}, {b.data(), b.size()});
}
// RFC 9110 field-value and reason-phrase bytes: HTAB, SP, VCHAR, obs-text.
bool is_value_byte(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return c == '\t' || (c >= 0x20 && c != 0x7f);
}

// The response as the client receives it: status line, fields, blank line, body.
void check_wire(std::string_view wire, const http_response& res, bool head) {
  const auto status = res.result_int();
  SLUICE_FUZZ_CHECK(status >= 200 && status <= 599);
  // 500 is an exception caught while answering: a bug, whatever the input.
  SLUICE_FUZZ_CHECK(status != 500);

  const auto eol = wire.find("\r\n");
  SLUICE_FUZZ_CHECK(eol != std::string_view::npos && eol >= 13);
  const auto line = wire.substr(0, eol);
  SLUICE_FUZZ_CHECK(line.starts_with("HTTP/") && is_digit(line[5]) && line[6] == '.' &&
                    is_digit(line[7]) && line[8] == ' ' && is_digit(line[9]) &&
                    is_digit(line[10]) && is_digit(line[11]) && line[12] == ' ');
  SLUICE_FUZZ_CHECK(std::to_string(status) == line.substr(9, 3));
  for (char c : line.substr(13)) SLUICE_FUZZ_CHECK(is_value_byte(c));

  std::size_t pos = eol + 2;
  int content_lengths = 0;
  std::string content_type;
  std::uint64_t content_length = 0;
  for (;;) {
    const auto end = wire.find("\r\n", pos);
    SLUICE_FUZZ_CHECK(end != std::string_view::npos);
    const auto field = wire.substr(pos, end - pos);
    pos = end + 2;
    if (field.empty()) break;
    const auto colon = field.find(':');
    SLUICE_FUZZ_CHECK(colon != std::string_view::npos && colon > 0);
    for (char c : field.substr(0, colon)) SLUICE_FUZZ_CHECK(is_tchar(c));
    for (char c : field.substr(colon + 1)) SLUICE_FUZZ_CHECK(is_value_byte(c));
    const auto name = field.substr(0, colon);
    auto value = field.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (iequals(name, "Content-Length")) {
      ++content_lengths;
      SLUICE_FUZZ_CHECK(!value.empty());
      for (char c : value) SLUICE_FUZZ_CHECK(is_digit(c));
      content_length = std::stoull(std::string(value));
    }
    if (iequals(name, "Content-Type")) content_type = std::string(value);
  }
  SLUICE_FUZZ_CHECK(content_lengths == 1);
  const auto body = wire.substr(pos);
  if (head) {
    SLUICE_FUZZ_CHECK(body.empty());
  } else {
    SLUICE_FUZZ_CHECK(body.size() == content_length);
  }
  SLUICE_FUZZ_CHECK(sluice::fuzz::is_utf8(body));

  // A client's parser reads it back as exactly this one response.
  bhttp::response_parser<bhttp::string_body> parser;
  parser.skip(head);
  parser.eager(true);
  boost::beast::error_code ec;
  const auto used = parser.put(boost::asio::buffer(wire.data(), wire.size()), ec);
  SLUICE_FUZZ_CHECK(!ec && parser.is_done() && used == wire.size());
  SLUICE_FUZZ_CHECK(parser.get().result_int() == status && parser.get().body() == body);

  if (head || body.empty()) return;
  const bool problem = content_type.starts_with("application/problem+json");
  if (problem || content_type.starts_with("application/json")) {
    const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    SLUICE_FUZZ_CHECK(j.is_object());
    if (problem) {
      SLUICE_FUZZ_CHECK(j.contains("status") && j["status"] == status);
      SLUICE_FUZZ_CHECK(j.contains("title") && j["title"].is_string());
    }
  }
}

// Parses one request from the front of `bytes`; std::nullopt when the bytes are refused
// or incomplete. `used` is how many bytes it took.
std::optional<daemon::http_request> parse_one(std::string_view bytes, std::size_t& used,
                                              const daemon::limits_config& limits) {
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  parser.eager(true);
  used = 0;
  while (!parser.is_done()) {
    boost::beast::error_code ec;
    const auto n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec || n == 0) return std::nullopt;  // refused, or waiting for bytes that never come
  }
  return parser.release();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // A service of its own for each input, on a clock that stands still: the answers depend
  // on this input alone (so a crash reproduces from its file, and a run with a fixed seed
  // takes the same path on every machine), and its buckets go with it.
  const auto& cfg = config_for((data[0] >> 3) & 3);
  daemon::service svc(cfg, {}, std::make_shared<sluice::manual_clock>());
  boost::asio::io_context io;
  const std::string peer = peers[data[0] & 7];
  auto bytes = sluice::fuzz::as_text(data + 1, size - 1);

  for (int pipelined = 0; pipelined < 8 && !bytes.empty(); ++pipelined) {
    std::size_t used = 0;
    auto req = parse_one(bytes, used, cfg.limits);
    if (!req) break;
    bytes.remove_prefix(used);
    const bool keep_alive = req->keep_alive();
    const bool head = req->method() == bhttp::verb::head;

    int calls = 0;
    std::optional<http_response> res;
    // As a session calls it: on the connection's executor. There the memory backend answers
    // every request before handle() returns, and only once.
    io.restart();
    boost::asio::post(io, [&] {
      svc.handle(std::move(*req), peer, io.get_executor(), [&](http_response r) {
        ++calls;
        res = std::move(r);
      });
      SLUICE_FUZZ_CHECK(calls == 1 && res);
    });
    io.poll();
    SLUICE_FUZZ_CHECK(calls == 1);

    // As the session writes it (server.cpp).
    res->keep_alive(keep_alive);
    if (!res->has_content_length()) res->prepare_payload();
    std::string wire;
    daemon::append_wire_response(*res, wire);
    check_wire(wire, *res, head);
    if (!keep_alive) break;  // the session closes the connection after this answer
  }
  return 0;
}
