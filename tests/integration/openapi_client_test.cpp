// A client generated from the OpenAPI document that a running sluiced serves at /openapi.json
// talks to it: tests/openapi/generated_client.js builds the client with openapi-client-axios
// (npm, pinned in tests/openapi/, installed by scripts/bootstrap) from GET /openapi.json of the
// sluiced started here, calls every operation of the document through it (success and error
// answers: 400 and 422 problems, 429 with Retry-After, 401/403 without the admin token) and
// asserts on the decoded values. It exits 0 only when every assertion held.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/process_child.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

const std::string source_dir = SLUICE_SOURCE_DIR;
const std::string token = "s3cret-admin-token";

TEST(OpenApiClientTest, AGeneratedClientCallsEveryOperation) {
  const std::string dir = make_temp_dir("sluice-openapi-client");
  std::ofstream(dir + "/admin.token") << token << "\n";
  // A day's window: a fixed window that turns over between the script's calls would reset.
  std::ofstream(dir + "/limits.yaml") << "domain: edge\n"
                                         "descriptors:\n"
                                         "  - key: tenant\n"
                                         "    rate_limit: {unit: day, requests_per_unit: 2}\n";
  // What generated_client.js expects: refills too slow to matter during the run.
  sluiced_process d(
      "policies:\n"
      "  api: {capacity: 3, refill_per_second: 0.001}\n"
      "  web: {capacity: 2, refill_per_second: 0.001}\n"
      "  jobs: {algorithm: concurrency, limit: 1, lease_ttl: 30s}\n"
      "rules:\n"
      "  - {name: site, match: {path_prefix: /app}, key: ip, policy: web}\n"
      "trusted_proxies: [127.0.0.1/32]\n"
      "admin: {token_file: " +
      dir + "/admin.token}\nenvoy_rls:\n  config: [" + dir + "/limits.yaml]\n");

  // The document the client is built from is the one this sluiced serves.
  const auto served = http_request(d.port(), "GET", "/openapi.json");
  ASSERT_EQ(served.status, 200);
  const auto document = nlohmann::json::parse(served.body);
  std::size_t operations = 0;
  for (const auto& [path, item] : document.at("paths").items()) {
    for (const char* method : {"get", "put", "post", "delete", "options", "head", "patch", "trace"})
      operations += item.contains(method) ? 1 : 0;
  }
  EXPECT_GT(operations, 0u);

  const auto client = run_to_end({"node", source_dir + "/tests/openapi/generated_client.js",
                                  "http://127.0.0.1:" + std::to_string(d.port()), token},
                                 60s);
  EXPECT_EQ(client.status, 0) << client.output;
  EXPECT_NE(client.output.find("ok: " + std::to_string(operations) + " operations"),
            std::string::npos)
      << client.output;
  EXPECT_TRUE(d.process().running()) << d.process().stderr_text();
}

}  // namespace
}  // namespace sluice::test
