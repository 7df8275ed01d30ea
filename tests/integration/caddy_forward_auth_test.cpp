// A real Caddy (Debian's caddy 2.6) in front of a `respond` handler, asking sluiced through
// forward_auth: the policy's capacity of 200s carrying the decision's headers, then 429 with
// Retry-After and the rate-limit headers passed through; a client's X-Forwarded-For changes
// nothing; with sluiced down, Caddy answers 502. The Caddyfile is the one documented in
// docs/proxies.md, read from it.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/loopback.hpp"
#include "support/process_child.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

std::string doc_block(const std::string& fence_start) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/docs/proxies.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto caddy = doc.find("## Caddy");
  const auto open = doc.find(fence_start, caddy);
  if (caddy == std::string::npos || open == std::string::npos) {
    throw std::runtime_error("docs/proxies.md: no " + fence_start + " block under ## Caddy");
  }
  const auto body = doc.find('\n', open) + 1;
  return doc.substr(body, doc.find("```", body) - body);
}

void replace(std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("docs/proxies.md: no " + from);
  text.replace(at, from.size(), to);
}

// Caddy with the documented Caddyfile on a free port, in front of sluiced at `sluiced_port`.
// The harness adds a global block: no admin endpoint (it would take port 2019, once per
// test), and Caddy's data and config directories in a temporary one.
class caddy_server {
 public:
  explicit caddy_server(std::uint16_t sluiced_port)
      : dir_(make_temp_dir("sluice-caddy")), port_(free_loopback_port()) {
    std::string site = doc_block("```caddyfile");
    replace(site, "http://127.0.0.1:80 {", "http://127.0.0.1:" + std::to_string(port_) + " {");
    replace(site, "127.0.0.1:8080", "127.0.0.1:" + std::to_string(sluiced_port));
    std::ofstream(dir_ + "/Caddyfile") << "{\n\tadmin off\n}\n\n" << site;
    child_ = std::make_unique<process_child>(
        std::vector<std::string>{"env", "XDG_DATA_HOME=" + dir_, "XDG_CONFIG_HOME=" + dir_, "caddy",
                                 "run", "--config", dir_ + "/Caddyfile", "--adapter", "caddyfile"},
        "caddy");
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!port_accepts(port_)) {
      if (std::chrono::steady_clock::now() > deadline || !child_->running()) {
        throw std::runtime_error("caddy did not start: " + child_->stderr_text());
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  std::uint16_t port() const noexcept { return port_; }
  std::string log() const { return child_->stderr_text(); }

 private:
  std::string dir_;
  std::uint16_t port_;
  std::unique_ptr<process_child> child_;
};

TEST(CaddyForwardAuthTest, AdmitsTheCapacityWithHeadersThenPasses429Through) {
  sluiced_process d(doc_block("```yaml"));
  caddy_server caddy(d.port());
  constexpr int n = 9;
  int ok = 0, limited = 0;
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    // A client's own X-Forwarded-For: Caddy sets its own, so the key stays the client's.
    const header_list spoof{{"X-Forwarded-For", "203.0.113." + std::to_string(i)}};
    const auto r = http_request(caddy.port(), "GET", "/page", "", spoof);
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "5") << caddy.log();
    if (r.status == 200) {
      ++ok;
      EXPECT_EQ(r.body, "hello");
      EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(5 - ok));
      // t: until the bucket is full again, 1000 s a token spent.
      EXPECT_EQ(r.header("RateLimit"),
                "\"site\";r=" + std::to_string(5 - ok) + ";t=" + std::to_string(1000 * ok));
      EXPECT_EQ(r.header("RateLimit-Policy"), "\"site\";q=5;w=5000");
      EXPECT_FALSE(r.has_header("Retry-After"));
    } else {
      ++limited;
      EXPECT_EQ(r.status, 429) << r.body;
      EXPECT_EQ(r.header("Retry-After"), "1000");  // one token at 0.001/s
      EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
      EXPECT_EQ(r.header("RateLimit"), "\"site\";r=0;t=1000");
      EXPECT_NE(r.body.find("\"status\":429"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(limited, n - 5);
}

TEST(CaddyForwardAuthTest, SluicedDownIsA502) {
  auto d = std::make_unique<sluiced_process>(doc_block("```yaml"));
  caddy_server caddy(d->port());
  EXPECT_EQ(http_request(caddy.port(), "GET", "/page").status, 200);
  d.reset();
  const auto r = http_request(caddy.port(), "GET", "/page");
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body, "hello");
}

}  // namespace
}  // namespace sluice::test
