// The `sluice` command as a user runs it: one JSON line per decision, exit status 0 allowed,
// 1 denied, 2 invalid input (with a message on stderr), on memory and on a real Redis, with
// each of the five algorithms (--algorithm) on memory. `sluice peek` takes check's flags and
// answers alike, spending nothing (cli_operations_test.cpp has it on Redis).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "support/black_hole_server.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using run_result = cli_result;

run_result sluice_command(const std::string& command, std::vector<std::string> args) {
  args.insert(args.begin(), command);
  return run_sluice(args);
}

run_result sluice_check(std::vector<std::string> args) {
  return sluice_command("check", std::move(args));
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
  for (const std::string command : {"check", "peek"}) {
    for (const auto& args : bad) {
      SCOPED_TRACE(command + " " + shown(args));
      const auto r = sluice_command(command, args);
      EXPECT_EQ(r.status, 2);
      EXPECT_TRUE(r.lines.empty());
      EXPECT_FALSE(r.err.empty());
    }
  }
  // The negative cost is named as such, not as an overflowing one.
  const auto neg =
      sluice_check({"--capacity", "5", "--refill-per-second", "1", "--key", "k", "--cost", "-1"});
  EXPECT_NE(neg.err.find("--cost"), std::string::npos) << neg.err;
}

// --algorithm picks how the limit counts; windows take --limit and --window. The example of
// the README: a quota of 2 per minute, the third request in the minute is denied until the
// minute ends.
TEST(CliCommandTest, FixedWindowAdmitsTheLimitThenDeniesUntilTheWindowEnds) {
  // The window is aligned to the epoch: should a minute end between the three decisions,
  // the third is the new minute's first; then the run is repeated once.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto r = sluice_check({"--algorithm", "fixed_window", "--limit", "2", "--window", "1m",
                                 "--key", "user:42", "--repeat", "3"});
    ASSERT_EQ(r.lines.size(), 3u) << r.err;
    EXPECT_EQ(r.err, "");
    if (r.lines[2]["allowed"] == true && r.lines[2]["reset_after_ms"].get<std::int64_t>() >
                                             r.lines[0]["reset_after_ms"].get<std::int64_t>()) {
      continue;  // a new minute began during the run
    }
    EXPECT_EQ(r.status, 1) << "the last decision was a denial";
    for (const auto& line : r.lines) {
      EXPECT_EQ(line["limit"], 2);
      EXPECT_EQ(line["degraded"], false);
    }
    EXPECT_EQ(r.lines[0]["allowed"], true);
    EXPECT_EQ(r.lines[0]["remaining"], 1);
    EXPECT_EQ(r.lines[1]["allowed"], true);
    EXPECT_EQ(r.lines[1]["remaining"], 0);
    EXPECT_EQ(r.lines[2]["allowed"], false);
    EXPECT_EQ(r.lines[2]["remaining"], 0);
    const auto retry = r.lines[2]["retry_after_ms"].get<std::int64_t>();
    EXPECT_GT(retry, 0);
    EXPECT_LE(retry, 60'000);
    // The wait is the rest of the minute: when the window resets.
    EXPECT_EQ(retry, r.lines[2]["reset_after_ms"].get<std::int64_t>());
    return;
  }
  FAIL() << "a minute ended during both runs";
}

TEST(CliCommandTest, EveryAlgorithmDecidesAndPrintsItsLimit) {
  struct algorithm_case {
    std::vector<std::string> flags;
    int limit;
  };
  const std::vector<algorithm_case> cases{
      {{"--capacity", "3", "--refill-per-second", "0.001"}, 3},  // token_bucket, the default
      {{"--algorithm", "token_bucket", "--capacity", "3", "--refill-per-second", "0.001"}, 3},
      {{"--algorithm", "gcra", "--capacity", "3", "--refill-per-second", "0.001"}, 3},
      {{"--algorithm", "sliding_window", "--limit", "3", "--window", "1h"}, 3},
      {{"--algorithm", "sliding_window_counter", "--limit", "3", "--window", "1d"}, 3},
      {{"--algorithm", "fixed_window", "--limit", "3", "--window", "366d"}, 3},
  };
  for (const auto& c : cases) {
    auto args = c.flags;
    SCOPED_TRACE(shown(args));
    for (const auto& a : {"--key", "k", "--repeat", "4"}) args.push_back(a);
    const auto r = sluice_check(args);
    EXPECT_EQ(r.status, 1) << r.err;
    ASSERT_EQ(r.lines.size(), 4u) << r.err;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(r.lines[i]["allowed"], true) << i;
      EXPECT_EQ(r.lines[i]["limit"], c.limit) << i;
      EXPECT_EQ(r.lines[i]["remaining"], 2 - i) << i;
    }
    EXPECT_EQ(r.lines[3]["allowed"], false);
    EXPECT_EQ(r.lines[3]["remaining"], 0);
    EXPECT_GT(r.lines[3]["retry_after_ms"].get<std::int64_t>(), 0);
  }
  // A sliding window: the first request leaves the window an hour after it came.
  const auto r = sluice_check({"--algorithm", "sliding_window", "--limit", "1", "--window", "1h",
                               "--key", "k", "--repeat", "2", "--cost", "1"});
  ASSERT_EQ(r.lines.size(), 2u) << r.err;
  const auto retry = r.lines[1]["retry_after_ms"].get<std::int64_t>();
  EXPECT_GT(retry, 3'590'000);
  EXPECT_LE(retry, 3'600'000);
  // A window's cost is counted in requests: 2 of a limit of 3, then 2 more do not fit.
  const auto costly = sluice_check({"--algorithm", "fixed_window", "--limit", "3", "--window",
                                    "366d", "--key", "k", "--cost", "2", "--repeat", "2"});
  ASSERT_EQ(costly.lines.size(), 2u) << costly.err;
  EXPECT_EQ(costly.lines[0]["remaining"], 1);
  EXPECT_EQ(costly.lines[1]["allowed"], false);
}

// Every wrong combination exits 2 with one line naming the flag, and before any connection:
// the Redis behind --backend (a black hole) never sees one.
TEST(CliCommandTest, AlgorithmFlagsThatDoNotFitExitTwoNamingTheFlag) {
  black_hole_server silent;
  struct bad_flags {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<bad_flags> bad{
      {{"--algorithm", "leaky_bucket", "--capacity", "5", "--refill-per-second", "1"},
       "sluice: --algorithm must be token_bucket, gcra, sliding_window, sliding_window_counter or "
       "fixed_window, got \"leaky_bucket\"\n"},
      {{"--algorithm", "fixed_window", "--limit", "5"},
       "sluice: --window is required with --algorithm fixed_window (e.g. --window 1m)\n"},
      {{"--algorithm", "sliding_window", "--window", "1m"},
       "sluice: --limit is required with --algorithm sliding_window\n"},
      {{"--algorithm", "sliding_window_counter", "--limit", "5", "--window", "1m", "--capacity",
        "5"},
       "sluice: --capacity is for token_bucket and gcra; sliding_window_counter takes --limit and "
       "--window\n"},
      {{"--algorithm", "fixed_window", "--limit", "5", "--window", "1m", "--refill-per-second",
        "1"},
       "sluice: --refill-per-second is for token_bucket and gcra; fixed_window takes --limit and "
       "--window\n"},
      {{"--capacity", "5", "--refill-per-second", "1", "--limit", "5"},
       "sluice: --limit is for sliding_window, sliding_window_counter and fixed_window; "
       "token_bucket takes --capacity and --refill-per-second\n"},
      {{"--algorithm", "gcra", "--capacity", "5", "--refill-per-second", "1", "--window", "1m"},
       "sluice: --window is for sliding_window, sliding_window_counter and fixed_window; gcra "
       "takes --capacity and --refill-per-second\n"},
      {{"--algorithm", "gcra", "--capacity", "5"},
       "sluice: --refill-per-second is required with --algorithm gcra\n"},
      {{"--refill-per-second", "1"},
       "sluice: --capacity is required with --algorithm token_bucket\n"},
      {{"--algorithm", "fixed_window", "--limit", "5", "--window", "0s"},
       "sluice: --window: \"0s\" is zero: a duration must be at least 1ms\n"},
      {{"--algorithm", "fixed_window", "--limit", "5", "--window", "60000"},
       "sluice: --window: \"60000\" is not a duration: want a whole number and a unit ms, s, m, "
       "h or d (e.g. 250ms, 1s, 1m, 1h, 1d)\n"},
      {{"--algorithm", "fixed_window", "--limit", "5", "--window", "1.5h"},
       "sluice: --window: \"1.5h\" is not a duration: want a whole number and a unit ms, s, m, "
       "h or d (e.g. 250ms, 1s, 1m, 1h, 1d)\n"},
      {{"--algorithm", "fixed_window", "--limit", "5", "--window", "9223372036854775808ms"},
       "sluice: --window: \"9223372036854775808ms\" is too long a duration (more than 2^63 - 1 "
       "ms)\n"},
      {{"--algorithm", "fixed_window", "--limit", "5", "--window", "367d"},
       "sluice: invalid input: --window: window must be 1 ms..366 days, got 367d\n"},
      {{"--algorithm", "sliding_window", "--limit", "10001", "--window", "1m"},
       "sluice: invalid input: --limit: limit must be 1..1000000000 (sliding_window: 1..10000; "
       "sliding_window_counter: limit x window_ms at most 4e15)\n"},
      {{"--algorithm", "fixed_window", "--limit", "5", "--window", "1m", "--cost", "6"},
       "sluice: invalid input: --cost 6 exceeds --limit 5 (a request may cost at most that)\n"},
      {{"--capacity", "5", "--refill-per-second", "1", "--cost", "6"},
       "sluice: invalid input: --cost 6 exceeds --capacity 5 (a request may cost at most that)\n"},
  };
  // peek takes check's flags, and says the same of them.
  for (const std::string command : {"check", "peek"}) {
    for (const auto& b : bad) {
      auto args = b.flags;
      SCOPED_TRACE(command + " " + shown(args));
      for (const auto& a : {"--key", "k"}) args.push_back(a);
      args.push_back("--backend");
      args.push_back(silent.url());
      const auto r = sluice_command(command, args);
      EXPECT_EQ(r.status, 2);
      EXPECT_TRUE(r.lines.empty());
      EXPECT_EQ(r.err, b.message);
    }
  }
  // CLI11's own checks name the flag too.
  for (const auto& limit : {"0", "-1", "1000000001"}) {
    const auto r = sluice_check({"--algorithm", "fixed_window", "--limit", limit, "--window", "1m",
                                 "--key", "k", "--backend", silent.url()});
    EXPECT_EQ(r.status, 2) << limit;
    EXPECT_NE(r.err.find("--limit"), std::string::npos) << r.err;
  }
  EXPECT_EQ(silent.accepted(), 0u);
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
