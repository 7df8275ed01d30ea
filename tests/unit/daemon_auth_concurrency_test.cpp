// A forward-auth rule (/v1/auth) naming a concurrency policy is refused when the config is
// read: sluiced --check-config (and start-up, and so reload) exits 2 with the file, line
// and field, and says why (docs/CONCURRENCY.md, "Forward-auth").
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app.hpp"

namespace sluice::daemon {
namespace {

TEST(DaemonAuthConcurrencyTest, ARuleNamingAConcurrencyPolicyExitsTwoWithFileLineFieldAndWhy) {
  char tmpl[] = "/tmp/sluice-auth-concurrency-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = tmpl;
  {
    std::ofstream out(path, std::ios::trunc);
    out << "policies:\n"
           "  api: {capacity: 10, refill_per_second: 1}\n"
           "  reports: {algorithm: concurrency, limit: 2, lease_ttl: 30s}\n"
           "rules:\n"
           "  - {name: site, match: {path_prefix: /}, key: ip, policy: api}\n"
           "  - name: reports\n"
           "    match: {path_prefix: /reports/}\n"
           "    key: ip\n"
           "    policy: reports\n";
  }
  std::vector<const char*> argv{"sluiced", "--config", path.c_str(), "--check-config"};
  app_options opts;
  std::ostringstream out, err;
  const auto code = parse_command_line(static_cast<int>(argv.size()), argv.data(), opts, out, err);
  std::remove(path.c_str());
  EXPECT_EQ(code, 2);
  EXPECT_EQ(err.str(), path +
                           ":9: rules[1].policy: \"reports\" is a concurrency policy; rules "
                           "(forward-auth /v1/auth) take rate policies only: /v1/auth never "
                           "learns when the upstream request ends, so it could not give a slot "
                           "back; let the upstream call /v1/acquire and /v1/release\n");
}

}  // namespace
}  // namespace sluice::daemon
