// The HTTP API's contract, packaging/openapi/sluiced.openapi.json (OpenAPI 3.1), checked by
// tools Sluice did not write:
// - Redocly's CLI (npm, pinned in tests/openapi/) lints the document: valid OpenAPI 3.1;
// - sluiced serves the same document at GET /openapi.json;
// - real exchanges with a running sluiced (every operation, success and error answers) are
//   valid against it, checked with python3-jsonschema (JSON Schema 2020-12) by
//   tests/openapi/check_responses.py.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/process_child.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

const std::string source_dir = SLUICE_SOURCE_DIR;
const std::string document = source_dir + "/packaging/openapi/sluiced.openapi.json";

run_result run(std::vector<std::string> argv) { return run_to_end(std::move(argv), 120s); }

TEST(OpenApiTest, TheDocumentIsValidOpenApi31) {
  const auto lint = run({"env", "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true",
                         source_dir + "/tests/openapi/node_modules/.bin/redocly", "lint",
                         "--format=summary", document});
  EXPECT_EQ(lint.status, 0) << lint.output;
  EXPECT_NE(lint.output.find("Your API description is valid"), std::string::npos) << lint.output;
  // A rule's finding is a summary line "warning <rule>: <n>" (and "You have <n> warnings").
  EXPECT_EQ(lint.output.find("\nwarning "), std::string::npos) << lint.output;
  EXPECT_EQ(lint.output.find("You have"), std::string::npos) << lint.output;
  EXPECT_EQ(json::parse(read_file_text(document)).at("openapi"), "3.1.0");
}

// Records what sluiced answers, for check_responses.py.
class recorder {
 public:
  explicit recorder(std::uint16_t port) : port_(port) {}

  http_reply send(const std::string& method, const std::string& target,
                  const std::string& path_template, const std::string& body = "",
                  const header_list& headers = {}) {
    auto r = http_request(port_, method, target, body, headers);
    exchanges_.push_back({{"method", method},
                          {"path", path_template},
                          {"status", r.status},
                          {"content_type", r.header("Content-Type")},
                          {"body", r.body}});
    return r;
  }
  http_reply post_json(const std::string& target, const std::string& body,
                       const header_list& extra = {}) {
    header_list h{{"Content-Type", "application/json"}};
    h.insert(h.end(), extra.begin(), extra.end());
    return send("POST", target, target, body, h);
  }
  const json& exchanges() const { return exchanges_; }

 private:
  std::uint16_t port_;
  json exchanges_ = json::array();
};

TEST(OpenApiTest, RealAnswersOfEveryOperationMatchTheDocument) {
  const std::string dir = make_temp_dir("sluice-openapi");
  std::ofstream(dir + "/admin.token") << "s3cret-admin-token\n";
  std::ofstream(dir + "/limits.yaml") << "domain: edge\n"
                                         "descriptors:\n"
                                         "  - key: tenant\n"
                                         "    rate_limit: {unit: minute, requests_per_unit: 1}\n";
  sluiced_process d(
      "policies: {api: {capacity: 2, refill_per_second: 0.01},\n"
      "           jobs: {algorithm: concurrency, limit: 1, lease_ttl: 30s}}\n"
      "rules:\n"
      "  - {name: site, match: {path_prefix: /}, key: ip, policy: api}\n"
      "admin: {token_file: " +
      dir + "/admin.token}\nenvoy_rls:\n  config: [" + dir + "/limits.yaml]\n");
  recorder r(d.port());
  const header_list admin{{"Authorization", "Bearer s3cret-admin-token"}};

  // Decisions: allowed, denied, and each kind of bad request.
  for (const std::string path : {"/v1/check", "/v1/peek"}) {
    r.post_json(path, R"({"key":"k","policy":"api"})");
    r.post_json(path, R"({"key":"k","policy":"api","cost":2})");
    r.post_json(path, R"({"key":"k")");
    r.post_json(path, R"({"key":"k","policy":"api","extra":1})");
    r.post_json(path, R"({"key":"k","policy":"nope"})");
    r.post_json(path, R"({"key":"","policy":"api"})");
    r.post_json(path, R"({"key":"k","policy":"api","cost":99})");
    r.send("POST", path, path, R"({"key":"k","policy":"api"})", {{"Content-Type", "text/plain"}});
    r.send("GET", path, path);
    r.post_json(path, "{\"key\":\"" + std::string(100'000, 'x') + "\",\"policy\":\"api\"}");
  }
  EXPECT_EQ(r.post_json("/v1/check", R"({"key":"k","policy":"api","cost":2})").status, 200);

  // Concurrency limits: acquired, refused, renewed, released, not held, bad requests.
  const auto got = r.post_json("/v1/acquire", R"({"key":"k","policy":"jobs"})");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(r.post_json("/v1/acquire", R"({"key":"k","policy":"jobs"})").status, 429);
  const auto id = got.status == 200 ? json::parse(got.body).value("slot", "") : "";
  const auto held = R"({"key":"k","policy":"jobs","slot":")" + id + "\"}";
  EXPECT_EQ(r.post_json("/v1/renew", held).status, 200);
  EXPECT_EQ(r.post_json("/v1/release", held).status, 200);
  EXPECT_EQ(r.post_json("/v1/release", held).status, 404);
  EXPECT_EQ(r.post_json("/v1/renew", held).status, 404);
  EXPECT_EQ(r.post_json("/v1/acquire", R"({"key":"k","policy":"api"})").status, 400);
  EXPECT_EQ(r.post_json("/v1/check", R"({"key":"k","policy":"jobs"})").status, 400);
  EXPECT_EQ(r.post_json("/v1/release", R"({"key":"k","policy":"jobs","slot":"nope"})").status, 422);
  EXPECT_EQ(r.post_json("/v1/renew", R"({"key":"k","policy":"jobs"})").status, 400);
  r.post_json("/v1/acquire", R"({"key":"","policy":"jobs"})");
  r.send("POST", "/v1/acquire", "/v1/acquire", R"({"key":"k","policy":"jobs"})",
         {{"Content-Type", "text/plain"}});
  r.send("GET", "/v1/release", "/v1/release");

  // Admin operations: done, unauthorized, forbidden, invalid.
  r.post_json("/v1/reset", R"({"key":"k","policy":"api"})", admin);
  r.post_json("/v1/refund", R"({"key":"k","policy":"api","cost":1})", admin);
  r.post_json("/v1/penalize", R"({"key":"k","policy":"api","cost":1})", admin);
  r.post_json("/v1/block", R"({"key":"k","policy":"api","duration_ms":1000})", admin);
  r.post_json("/v1/block", R"({"key":"k","policy":"api","duration_ms":0})", admin);
  r.post_json("/v1/refund", R"({"key":"k","policy":"api"})", admin);
  r.post_json("/v1/reset", R"({"key":"k","policy":"api"})");
  r.post_json("/v1/penalize", R"({"key":"k","policy":"api","cost":1})",
              {{"Authorization", "Bearer wrong"}});

  // Forward-auth, every method on both paths: allowed until the bucket is empty, then 429.
  for (const std::string method : {"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH"}) {
    r.send(method, "/v1/auth", "/v1/auth");
    r.send(method, "/v1/auth/some/page", "/v1/auth/{original_path}");
  }

  // Envoy's RLS over JSON: OK, over the limit, bad bodies.
  const std::string rls =
      R"({"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"t"}]}]})";
  EXPECT_EQ(r.post_json("/json", rls).status, 200);
  EXPECT_EQ(r.post_json("/json", rls).status, 429);
  r.post_json("/json", R"({"domain":"edge","nope":1})");
  r.send("POST", "/json", "/json", rls, {{"Content-Type", "text/plain"}});

  // Operations.
  r.send("GET", "/healthz", "/healthz");
  r.send("POST", "/healthz", "/healthz");
  r.send("GET", "/readyz", "/readyz");
  r.send("GET", "/metrics", "/metrics");
  const auto served = r.send("GET", "/openapi.json", "/openapi.json");
  EXPECT_EQ(served.status, 200);
  if (served.status == 200) {
    EXPECT_EQ(json::parse(served.body), json::parse(read_file_text(document)))
        << "GET /openapi.json is not packaging/openapi/sluiced.openapi.json";
  }

  std::ofstream(dir + "/exchanges.json") << r.exchanges().dump(2);
  const auto check = run({SLUICE_PYTHON3, source_dir + "/tests/openapi/check_responses.py",
                          document, dir + "/exchanges.json"});
  EXPECT_EQ(check.status, 0) << check.output;
}

TEST(OpenApiTest, AdminAndEnvoyEndpointsOffAre404sAsDocumented) {
  sluiced_process d("policies: {api: {capacity: 2, refill_per_second: 0.01}}\n");
  recorder r(d.port());
  for (const std::string path : {"/v1/reset", "/v1/refund", "/v1/penalize", "/v1/block", "/json"}) {
    EXPECT_EQ(r.post_json(path, R"({"key":"k","policy":"api","cost":1})").status, 404) << path;
  }
  const std::string dir = make_temp_dir("sluice-openapi-off");
  std::ofstream(dir + "/exchanges.json") << r.exchanges().dump(2);
  const auto check = run({SLUICE_PYTHON3, source_dir + "/tests/openapi/check_responses.py",
                          document, dir + "/exchanges.json", "--partial"});
  EXPECT_EQ(check.status, 0) << check.output;
}

}  // namespace
}  // namespace sluice::test
