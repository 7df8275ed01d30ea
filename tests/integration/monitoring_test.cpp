// What an operator points Prometheus and Grafana at, checked by Debian's own Prometheus:
// - packaging/monitoring/sluice-alerts.yml passes `promtool check rules`, and
//   tests/monitoring/sluice-alerts.test.yml (each alert fires on the series that should
//   fire it, not on a healthy daemon's) passes `promtool test rules`;
// - sluiced's /metrics passes `promtool check metrics`;
// - a real prometheus scrapes a running sluiced (on a real Redis that goes away halfway,
//   with Envoy's RLS on), and every expression of every panel of
//   packaging/monitoring/sluice-dashboard.json returns data.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/loopback.hpp"
#include "support/process_child.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string source_dir = SLUICE_SOURCE_DIR;
const std::string rules = source_dir + "/packaging/monitoring/sluice-alerts.yml";
const std::string rule_tests = source_dir + "/tests/monitoring/sluice-alerts.test.yml";
const std::string dashboard = source_dir + "/packaging/monitoring/sluice-dashboard.json";

run_result run(std::vector<std::string> argv) { return run_to_end(std::move(argv), 60s); }

std::string url_encode(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) {
    s.replace(at, from.size(), to);
  }
}

TEST(MonitoringTest, AlertRulesPassPromtoolAndTheirUnitTests) {
  const auto check = run({"promtool", "check", "rules", rules});
  EXPECT_EQ(check.status, 0) << check.output;
  const auto tests = run({"promtool", "test", "rules", rule_tests});
  EXPECT_EQ(tests.status, 0) << tests.output;
  EXPECT_NE(tests.output.find("SUCCESS"), std::string::npos) << tests.output;
}

// A real prometheus on a free port scraping `target` every second.
class prometheus_server {
 public:
  explicit prometheus_server(std::uint16_t target) : dir_(make_temp_dir("sluice-prometheus")) {
    port_ = free_loopback_port();
    std::ofstream(dir_ + "/prometheus.yml")
        << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        << "scrape_configs:\n"
        << "  - job_name: sluice\n"
        << "    static_configs: [{targets: ['127.0.0.1:" << target << "']}]\n";
    child_ = std::make_unique<process_child>(
        std::vector<std::string>{"prometheus", "--config.file=" + dir_ + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir_ + "/data",
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
        "prometheus");
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!port_accepts(port_)) {
      if (std::chrono::steady_clock::now() > deadline || !child_->running()) {
        throw std::runtime_error("prometheus did not start: " + child_->stderr_text());
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  // The `data.result` of an instant query.
  json query(const std::string& promql) {
    const auto r = http_request(port_, "GET", "/api/v1/query?query=" + url_encode(promql));
    if (r.status != 200) return json::array();
    return json::parse(r.body).at("data").at("result");
  }

  // Polls `promql` until it returns data, up to `within`.
  json wait_for(const std::string& promql, std::chrono::seconds within = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
      auto result = query(promql);
      if (!result.empty() || std::chrono::steady_clock::now() > deadline) return result;
      std::this_thread::sleep_for(200ms);
    }
  }

  std::string log() const { return child_->stderr_text(); }

 private:
  std::string dir_;
  std::uint16_t port_ = 0;
  std::unique_ptr<process_child> child_;
};

TEST(MonitoringTest, EveryDashboardPanelHasDataFromARealPrometheus) {
  auto redis = std::make_unique<redis_server>();
  const std::string dir = make_temp_dir("sluice-monitoring");
  std::ofstream(dir + "/limits.yaml") << "domain: edge\n"
                                         "descriptors:\n"
                                         "  - key: tenant\n"
                                         "    rate_limit: {unit: minute, requests_per_unit: 3}\n";
  sluiced_process d("backend: redis://127.0.0.1:" + std::to_string(redis->port()) +
                    "\nbackend_timeout_ms: 200\n"
                    "policies: {api: {capacity: 3, refill_per_second: 0.01}}\n"
                    "envoy_rls:\n  config: [" +
                    dir + "/limits.yaml]\n");
  const header_list ct{{"Content-Type", "application/json"}};
  const auto traffic = [&] {
    for (int i = 0; i < 6; ++i) {
      post_check(d.port(), R"({"key":"k)" + std::to_string(i % 2) + R"(","policy":"api"})");
      http_request(
          d.port(), "POST", "/json",
          R"({"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"t1"}]}]})", ct);
    }
  };
  traffic();  // allowed and denied, on Redis
  prometheus_server prom(d.port());
  ASSERT_FALSE(prom.wait_for("sluice_decisions_total").empty()) << prom.log();
  // Redis goes away: decisions by the failure mode, backend errors, the breaker open.
  redis.reset();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (prom.query("sluice_degraded_decisions_total > 0").empty() ||
         prom.query("sluice_backend_connected == 0").empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << prom.log();
    traffic();
    std::this_thread::sleep_for(300ms);
  }
  std::this_thread::sleep_for(2s);  // two more scrapes, so every rate has two points

  const json dash = json::parse(read_file_text(dashboard));
  int queried = 0;
  for (const auto& panel : dash.at("panels")) {
    for (const auto& target : panel.at("targets")) {
      std::string expr = target.at("expr");
      SCOPED_TRACE(panel.at("title").get<std::string>() + ": " + expr);
      replace_all(expr, "$__rate_interval", "30s");
      replace_all(expr, "$__range", "5m");
      replace_all(expr, "$instance", ".*");
      EXPECT_FALSE(prom.query(expr).empty()) << "no data";
      ++queried;
    }
  }
  EXPECT_GE(queried, 12);
  // The dashboard's instance variable lists this sluiced.
  EXPECT_FALSE(prom.query("sluice_backend_connected").empty());
}

TEST(MonitoringTest, MetricsPagePassesPromtoolCheckMetrics) {
  redis_server redis;
  const std::string dir = make_temp_dir("sluice-metrics-lint");
  std::ofstream(dir + "/limits.yaml") << "domain: edge\n"
                                         "descriptors:\n"
                                         "  - key: tenant\n"
                                         "    rate_limit: {unit: minute, requests_per_unit: 1}\n";
  sluiced_process d("backend: redis://127.0.0.1:" + std::to_string(redis.port()) +
                    "\npolicies: {api: {capacity: 1, refill_per_second: 0.01}}\n"
                    "envoy_rls:\n  config: [" +
                    dir + "/limits.yaml]\n");
  const header_list ct{{"Content-Type", "application/json"}};
  for (int i = 0; i < 3; ++i) {
    post_check(d.port(), R"({"key":"k","policy":"api"})");
    http_request(d.port(), "POST", "/json",
                 R"({"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"t"}]}]})",
                 ct);
  }
  const auto page = http_request(d.port(), "GET", "/metrics");
  ASSERT_EQ(page.status, 200);
  std::ofstream(dir + "/metrics.txt") << page.body;
  const auto lint = run({"sh", "-c", "promtool check metrics < '" + dir + "/metrics.txt'"});
  EXPECT_EQ(lint.status, 0) << lint.output;
  EXPECT_EQ(lint.output, "") << lint.output;
}

}  // namespace
}  // namespace sluice::test
