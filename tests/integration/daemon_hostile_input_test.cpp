// sluiced against a hostile client, on a real socket: thousands of malformed requests
// (bytes that are not UTF-8, control bytes everywhere, broken framing, huge heads,
// pipelining, half-closed and abandoned sockets), connections over the limit, and heads that
// never finish. Afterwards the daemon must be alive, decide exactly, and be back near the
// descriptors and memory it started with.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/test_seed.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace bhttp = boost::beast::http;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;  // the daemon under test is built the same way
#else
constexpr bool sanitized = false;
#endif

// Forwarding headers believed from the test client (loopback), keys from headers and paths.
std::string hostile_config(const std::string& limits =
                               "{max_header_bytes: 4096, max_body_bytes: 2048, "
                               "request_head_timeout_ms: 1500}") {
  return R"(trusted_proxies: [127.0.0.1/32]
forwarded_header: forwarded-then-x-forwarded-for
policies:
  api: {capacity: 5, refill_per_second: 0.001}
  wide: {capacity: 1000000, refill_per_second: 1000}
rules:
  - {name: keyed, match: {path_prefix: /api}, key: "header:X-API-Key", policy: wide}
  - {name: all, match: {path_prefix: /}, key: "ip+path", policy: wide}
limits: )" +
         limits + "\n";
}

// The value of an unlabelled or labelled series in a /metrics text, -1 when absent.
double metric(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// A connected TCP socket to 127.0.0.1:port with a receive timeout; closed when destroyed.
class raw_socket {
 public:
  explicit raw_socket(std::uint16_t port, std::chrono::milliseconds timeout = 3s) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
  }
  ~raw_socket() { close(); }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Sends what the peer takes; a peer that closed early is not an error here.
  void send(std::string_view bytes) {
    while (fd_ >= 0 && !bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  // Everything until EOF, an error or the timeout; `eof` says whether the peer closed.
  std::string read_all(bool* eof = nullptr) {
    std::string out;
    char buf[8192];
    for (;;) {
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        out.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (eof) *eof = n == 0 || errno == ECONNRESET;
      return out;
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::size_t open_descriptors(pid_t pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

std::size_t resident_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

bool valid_utf8(std::string_view s) {
  try {
    (void)json(std::string(s)).dump();  // throws type_error 316 on invalid UTF-8
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// Checks every response in `bytes` (a connection's whole answer): well-framed, no field
// value with a control byte, JSON bodies valid, and never a 5xx. Returns how many.
int check_responses(std::string_view bytes, const std::string& sent) {
  int count = 0;
  while (!bytes.empty()) {
    bhttp::response_parser<bhttp::string_body> p;
    p.eager(true);
    p.body_limit(1 << 20);
    boost::system::error_code ec;
    const auto used = p.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    if (!ec && !p.is_done()) ec = bhttp::error::need_more;
    if (ec) {
      ADD_FAILURE() << "a response that does not parse (" << ec.message() << ") after sending "
                    << json(sent).dump(-1, ' ', true, json::error_handler_t::replace);
      return count;
    }
    bytes.remove_prefix(used);
    const auto& res = p.get();
    ++count;
    EXPECT_LT(res.result_int(), 500u) << res;
    for (const auto& f : res) {
      for (const char c : f.value()) {
        EXPECT_TRUE(c == '\t' || static_cast<unsigned char>(c) >= 0x20) << f.name_string();
      }
    }
    const auto type = std::string(res[bhttp::field::content_type]);
    if (type.find("json") != std::string::npos) {
      EXPECT_TRUE(valid_utf8(res.body())) << res.body();
      EXPECT_TRUE(json::accept(res.body())) << res.body();
    }
    if (res.result_int() >= 400 && res.result_int() != 429) {
      EXPECT_EQ(type, "application/problem+json") << res;
    }
  }
  return count;
}

// The valid requests that the mutations start from.
std::vector<std::string> seeds() {
  return {
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 43\r\n\r\n{\"key\":\"user:1\",\"policy\":\"wide\",\"cost\":1}\n",
      "GET /v1/auth/api/items HTTP/1.1\r\nHost: x\r\nX-API-Key: k1\r\n\r\n",
      "GET /v1/auth HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.7, 10.0.0.1\r\n"
      "X-Forwarded-Uri: /login?x=1\r\nX-Forwarded-Method: POST\r\nX-Forwarded-Host: "
      "a.example\r\n\r\n",
      "GET /v1/auth HTTP/1.1\r\nHost: x\r\nForwarded: for=\"[2001:db8::1]:443\";proto=https, "
      "for=_hidden\r\n\r\n",
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n1e\r\n{\"key\":\"k\",\"policy\":\"wide\"}  \r\n0\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
      // HTTP/1.0, no Host. (Not HEAD: which answers have no body cannot be told from
      // the bytes alone once requests are mutated.)
      "GET /readyz HTTP/1.0\r\n\r\n",
  };
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

// One hostile request: a seed mutated a few times.
std::string mutate(std::string s, std::mt19937& rng) {
  const auto pick = [&](std::size_t n) { return n == 0 ? 0 : rng() % n; };
  const auto nasty = [&] {
    static constexpr char bytes[] = {'\0', '\r', '\n', '\x1b', '\x7f', '\x80', '\xc0', '\xff',
                                     '\t', ' ',  ':',  '"',    '\\',   ',',    ';',    '%'};
    return bytes[pick(sizeof bytes)];
  };
  const int edits = 1 + static_cast<int>(pick(4));
  for (int i = 0; i < edits; ++i) {
    switch (pick(10)) {
      case 0:
        s.insert(pick(s.size() + 1), 1, nasty());
        break;
      case 1:
        if (!s.empty()) s[pick(s.size())] = nasty();
        break;
      case 2:
        s.insert(pick(s.size() + 1), random_bytes(rng, 1 + pick(16)));
        break;
      case 3:
        if (!s.empty()) s.erase(pick(s.size()), 1 + pick(8));
        break;
      case 4: {  // a header the size limit must stop (or nearly)
        const auto at = s.find("\r\n");
        if (at != std::string::npos) {
          s.insert(at + 2,
                   "X-Big: " + std::string(3000 + pick(3000), 'a' + char(pick(26))) + "\r\n");
        }
        break;
      }
      case 5: {  // a forwarding header full of garbage, from the trusted peer
        const auto at = s.find("\r\n");
        static constexpr const char* names[] = {"X-Forwarded-For", "Forwarded", "X-Forwarded-Uri",
                                                "X-Forwarded-Host", "X-API-Key"};
        if (at != std::string::npos) {
          s.insert(at + 2,
                   std::string(names[pick(5)]) + ": " + random_bytes(rng, pick(40)) + "\r\n");
        }
        break;
      }
      case 6:  // a lying Content-Length
        s = std::string(
                "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n") +
            "Content-Length: " +
            std::vector<std::string>{"-1",  "99999999999999999999",    "5", "0x10",
                                     "1,2", std::to_string(pick(5000))}[pick(6)] +
            "\r\n\r\n" + random_bytes(rng, pick(64));
        break;
      case 7:  // bare LF or bare CR line ends
        for (auto& c : s) {
          if (c == '\r' && pick(2)) c = pick(2) ? '\n' : ' ';
        }
        break;
      case 8:  // cut short
        s.resize(pick(s.size() + 1));
        break;
      default:  // pipelined: another request (or its start) behind this one
        s += seeds()[pick(seeds().size())].substr(0, 10 + pick(200));
        break;
    }
  }
  return s;
}

TEST(DaemonHostileInputTest, TheIssueReproducerGetsA404ProblemAndTheDaemonServesOn) {
  sluiced_process d(std::nullopt);
  raw_socket s(d.port());
  ASSERT_TRUE(s.ok());
  s.send("GET /\xff/ HTTP/1.1\r\nHost: x\r\n\r\n");
  s.shutdown_write();
  const auto bytes = s.read_all();
  EXPECT_EQ(check_responses(bytes, "reproducer"), 1);
  EXPECT_EQ(bytes.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << bytes;
  EXPECT_NE(bytes.find("\"detail\":\"no such endpoint: /\xef\xbf\xbd/\""), std::string::npos);
  EXPECT_TRUE(d.process().running());
  EXPECT_EQ(http_request(d.port(), "GET", "/healthz").status, 200);
}

TEST(DaemonHostileInputTest, ThousandsOfMalformedRequestsLeaveItAliveExactAndClean) {
  sluiced_process d(hostile_config());
  const auto pid = d.process().pid();
  // Warm up (each thread's first connection, the metrics registry) before the baseline.
  for (int i = 0; i < 8; ++i) ASSERT_EQ(http_request(d.port(), "GET", "/metrics").status, 200);
  const auto fds_before = open_descriptors(pid);
  const auto rss_before = resident_kib(pid);

  const auto seed = static_cast<unsigned>(test_seed(20261207));
  SCOPED_TRACE(seed_trace(seed));
  constexpr int clients = 8;
  constexpr int per_client = 625;  // 5,000 requests, hundreds of them pipelined
  std::atomic<int> answered{0};
  std::vector<std::thread> pool;
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back([&, c] {
      std::mt19937 rng(seed + static_cast<unsigned>(c));
      const auto base = seeds();
      for (int i = 0; i < per_client; ++i) {
        const auto req = mutate(base[rng() % base.size()], rng);
        raw_socket s(d.port());
        if (!s.ok()) {
          ADD_FAILURE() << "connect failed";
          return;
        }
        const auto how = rng() % 4;
        if (how == 0) continue;  // abandoned: closed at once, the answer unread (RST)
        if (how == 1) {
          // Framing split across reads: the request in small pieces.
          for (std::size_t at = 0; at < req.size();) {
            const auto n = std::min<std::size_t>(1 + rng() % 7, req.size() - at);
            s.send(std::string_view(req).substr(at, n));
            at += n;
          }
        } else {
          s.send(req);
        }
        {
          {  // half-closed: everything the daemon answers, up to its close
            s.shutdown_write();
            bool eof = false;
            const auto bytes = s.read_all(&eof);
            EXPECT_TRUE(eof) << "the daemon kept a half-closed connection open";
            answered += check_responses(bytes, req);
          }
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_GT(answered.load(), clients * per_client / 4);

  // Alive, and exact: a fresh key gets exactly its capacity.
  ASSERT_TRUE(d.process().running()) << d.process().stderr_text();
  for (int i = 0; i < 5; ++i) {
    const auto r = post_check(d.port(), R"({"key":"after-the-storm","policy":"api"})");
    ASSERT_EQ(r.status, 200) << r.body;
    const auto j = json::parse(r.body);
    EXPECT_EQ(j["allowed"], true);
    EXPECT_EQ(j["remaining"], 4 - i);
  }
  const auto denied = post_check(d.port(), R"({"key":"after-the-storm","policy":"api"})");
  EXPECT_EQ(json::parse(denied.body)["allowed"], false);

  // Back near where it started: every connection closed (the daemon's side too), memory
  // not growing with what it was sent.
  std::size_t fds_after = 0;
  for (int i = 0; i < 100; ++i) {
    fds_after = open_descriptors(pid);
    if (fds_after <= fds_before + 2) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LE(fds_after, fds_before + 2) << "descriptors before " << fds_before;
  const auto rss_after = resident_kib(pid);
  // Sanitizer builds keep freed memory in quarantine (ASan: up to 256 MiB) by design.
  const std::size_t allowed_kib = sanitized ? 320 * 1024 : 32 * 1024;
  EXPECT_LE(rss_after, rss_before + allowed_kib) << "KiB before " << rss_before;

  const auto metrics = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("sluice_internal_errors_total{where=\"request\"} 0"), std::string::npos);
  EXPECT_NE(metrics.find("sluice_internal_errors_total{where=\"io\"} 0"), std::string::npos);
  // The log holds no raw control byte a client sent (every line escaped).
  const auto log = d.process().stderr_text();
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_EQ(log.find('\0'), std::string::npos);
}

// Over limits.max_connections, a new connection is closed at once and counted, and the
// clients already connected are answered as before.
TEST(DaemonHostileInputTest, ConnectionsOverTheLimitAreClosedAndTheOthersServed) {
  sluiced_process d(hostile_config("{max_connections: 8}"));
  http_connection client(d.port());
  ASSERT_EQ(client.request("GET", "/healthz").status, 200);
  // Until the daemon has seen the end of the connections that the harness opened to find
  // it ready, they count against the limit too: wait for the client to be the only one.
  for (int i = 0; i < 500; ++i) {
    if (metric(client.request("GET", "/metrics").body, "sluice_connections_open") == 1) break;
    std::this_thread::sleep_for(20ms);
  }
  std::vector<std::unique_ptr<raw_socket>> silent;
  for (int i = 0; i < 7; ++i) silent.push_back(std::make_unique<raw_socket>(d.port()));
  for (const auto& s : silent) ASSERT_TRUE(s->ok());
  // Accepting them may take a while on a loaded machine.
  std::string metrics_text;
  for (int i = 0; i < 500; ++i) {
    metrics_text = client.request("GET", "/metrics").body;
    if (metric(metrics_text, "sluice_connections_open") == 8) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(metric(metrics_text, "sluice_connections_open"), 8) << metrics_text;

  for (int i = 0; i < 20; ++i) {
    raw_socket extra(d.port());
    ASSERT_TRUE(extra.ok());
    extra.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    bool eof = false;
    const auto answer = extra.read_all(&eof);
    EXPECT_TRUE(eof) << "connection " << i << " over the limit was not closed";
    EXPECT_EQ(answer, "");
  }
  // The connected client is served exactly as before.
  const auto r = client.request("POST", "/v1/check", R"({"key":"still","policy":"api"})",
                                {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["remaining"], 4);
  const auto text = client.request("GET", "/metrics").body;
  EXPECT_EQ(metric(text, R"(sluice_connections_rejected_total{reason="max_connections"})"), 20);
  EXPECT_EQ(metric(text, "sluice_connections_open"), 8);
  // Once connections close, new ones are accepted again.
  silent.clear();
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    try {
      served = http_request(d.port(), "GET", "/healthz").status == 200;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_TRUE(served);
  const auto log = d.process().stderr_text();
  EXPECT_NE(log.find("limits.max_connections (8) reached"), std::string::npos) << log;
}

// A request head (or body) must arrive within request_head_timeout_ms of its first byte;
// a connection waiting for its first byte has the (longer) idle timeout.
TEST(DaemonHostileInputTest, AHeadThatNeverEndsIsClosedAndAnIdleConnectionIsNot) {
  sluiced_process d(hostile_config("{request_head_timeout_ms: 300, idle_timeout_ms: 20000}"));
  raw_socket idle(d.port());
  raw_socket head(d.port(), 5s);
  raw_socket body(d.port(), 5s);
  head.send("GET /healthz HTTP/1.1\r\nHost: x\r\n");  // no blank line: the head never ends
  body.send(
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 100\r\n\r\n{\"key\":");
  const auto start = std::chrono::steady_clock::now();
  bool eof = false;
  EXPECT_EQ(head.read_all(&eof), "");
  EXPECT_TRUE(eof);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 4s);
  eof = false;
  EXPECT_EQ(body.read_all(&eof), "");
  EXPECT_TRUE(eof);

  // Well past the head timeout (more than twice it since the idle connection opened), the
  // idle connection is still there and is served. Time passing is what is tested here.
  std::this_thread::sleep_until(start + 700ms);
  idle.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const auto answer = idle.read_all();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;

  const auto text = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric(text, R"(sluice_request_read_timeouts_total{phase="head"})"), 1);
  EXPECT_EQ(metric(text, R"(sluice_request_read_timeouts_total{phase="body"})"), 1);
}

}  // namespace
}  // namespace sluice::test
