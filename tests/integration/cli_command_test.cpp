// The `sluice` command as a user runs it: one JSON line per decision, exit status 0 allowed,
// 1 denied, 2 invalid input (with a message on stderr), on memory and on a real Redis.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/black_hole_server.hpp"
#include "support/process_child.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;

struct run_result {
  int status = -1;
  std::vector<json> lines;  // stdout, one JSON object per line
  std::string err;
};

run_result sluice_check(std::vector<std::string> args) {
  const char* env = std::getenv("SLUICE_CLI");
  std::vector<std::string> argv{env ? env : SLUICE_CLI_PATH, "check"};
  argv.insert(argv.end(), args.begin(), args.end());
  process_child p(argv, "sluice");
  run_result r;
  r.status = p.wait(std::chrono::seconds{20}).value_or(-1);
  std::istringstream out(p.stdout_text());
  for (std::string line; std::getline(out, line);) r.lines.push_back(json::parse(line));
  r.err = p.stderr_text();
  return r;
}

TEST(CliCommandTest, BurstThenDenialOnMemory) {
  const auto r = sluice_check({"--backend", "memory", "--capacity", "2", "--refill-per-second",
                               "0.001", "--key", "user:42", "--repeat", "3"});
  EXPECT_EQ(r.status, 1) << "the last decision was a denial";
  ASSERT_EQ(r.lines.size(), 3u) << r.err;
  EXPECT_EQ(r.lines[0]["allowed"], true);
  EXPECT_EQ(r.lines[0]["remaining"], 1);
  EXPECT_EQ(r.lines[1]["allowed"], true);
  EXPECT_EQ(r.lines[2]["allowed"], false);
  // One token at 0.001/s is 1000 s, less the real time the run took (the CLI's clock runs).
  const auto retry = r.lines[2]["retry_after_ms"].get<std::int64_t>();
  EXPECT_LE(retry, 1'000'000);
  EXPECT_GT(retry, 990'000);
  EXPECT_EQ(r.lines[2]["degraded"], false);
}

TEST(CliCommandTest, InvalidInputExitsTwoWithAMessage) {
  const std::vector<std::vector<std::string>> bad{
      {"--capacity", "5", "--refill-per-second", "1", "--key", "k", "--cost", "0"},
      {"--capacity", "5", "--refill-per-second", "1", "--key", "k", "--cost", "-1"},
      {"--capacity", "5", "--refill-per-second", "1", "--key", "k", "--cost", "6"},
      {"--capacity", "0", "--refill-per-second", "1", "--key", "k"},
      {"--capacity", "5", "--refill-per-second", "0", "--key", "k"},
      {"--capacity", "5", "--refill-per-second", "1", "--key", ""},
      {"--capacity", "5", "--refill-per-second", "1", "--key", std::string(1025, 'k')},
      {"--capacity", "5", "--refill-per-second", "1", "--key", "k", "--backend", "mysql://x"},
      {"--capacity", "5", "--refill-per-second", "1", "--key", "k", "--on-failure", "maybe"},
      {"--capacity", "5", "--refill-per-second", "1"},  // no --key
  };
  for (const auto& args : bad) {
    std::string shown;
    for (const auto& a : args) shown += (a.size() > 40 ? a.substr(0, 40) + "..." : a) + " ";
    SCOPED_TRACE(shown);
    const auto r = sluice_check(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(r.lines.empty());
    EXPECT_FALSE(r.err.empty());
  }
  // The negative cost is named as such, not as an overflowing one.
  const auto neg =
      sluice_check({"--capacity", "5", "--refill-per-second", "1", "--key", "k", "--cost", "-1"});
  EXPECT_NE(neg.err.find("--cost"), std::string::npos) << neg.err;
}

TEST(CliCommandTest, SeparateRunsShareOneRedisBucket) {
  redis_server redis;
  const std::vector<std::string> args{"--backend",           redis.url(), "--capacity", "2",
                                      "--refill-per-second", "0.001",     "--key",      "shared"};
  const auto a = sluice_check(args);
  const auto b = sluice_check(args);
  const auto c = sluice_check(args);
  EXPECT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(c.status, 1) << c.err;
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(c.lines[0]["degraded"], false);
}

// A library user's stdout is data, and a tool that prints a line per call is noise: the
// library writes nothing unless something is wrong, unless asked.
TEST(CliCommandTest, QuietOnAHealthyRedisUnlessVerbose) {
  redis_server redis;
  const std::vector<std::string> args{"--backend",           redis.url(), "--capacity", "5",
                                      "--refill-per-second", "1",         "--key",      "quiet"};
  const auto quiet = sluice_check(args);
  EXPECT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.lines.size(), 1u);
  EXPECT_EQ(quiet.err, "");
  auto verbose_args = args;
  verbose_args.push_back("-v");
  const auto verbose = sluice_check(verbose_args);
  EXPECT_EQ(verbose.status, 0) << verbose.err;
  EXPECT_EQ(verbose.lines.size(), 1u);
  EXPECT_NE(verbose.err.find("sluice: info: "), std::string::npos) << verbose.err;
  EXPECT_NE(verbose.err.find("connected to"), std::string::npos) << verbose.err;
}

TEST(CliCommandTest, AnUnreachableRedisFollowsTheFailureMode) {
  black_hole_server silent;
  for (const std::string mode : {"open", "closed"}) {
    SCOPED_TRACE(mode);
    const auto r =
        sluice_check({"--backend", silent.url(), "--capacity", "5", "--refill-per-second", "1",
                      "--key", "k", "--on-failure", mode, "--timeout-ms", "100"});
    EXPECT_EQ(r.status, mode == "open" ? 0 : 1) << r.err;
    ASSERT_EQ(r.lines.size(), 1u) << r.err;
    EXPECT_EQ(r.lines[0]["degraded"], true);
    EXPECT_EQ(r.lines[0]["allowed"], mode == "open");
  }
}

}  // namespace
}  // namespace sluice::test
