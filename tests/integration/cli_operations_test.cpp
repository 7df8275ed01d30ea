// `sluice peek`, `reset`, `refund`, `penalize` and `block` on a real Redis (a new process
// starts with an empty memory backend, so Redis is where separate runs share a key): each
// prints its decision as one JSON line; an operation exits 0, 2 for invalid input, 3 when
// the backend fails.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "support/black_hole_server.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

// `sluice COMMAND` with `flags` and then `extra`.
cli_result sluice(const std::string& command, const std::vector<std::string>& flags,
                  const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{command};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return run_sluice(args);
}

// One run of a sequence on one key, and what its last JSON line says.
struct step {
  std::string command;
  std::vector<std::string> extra;
  int status = 0;
  bool allowed = true;
  int remaining = 0;
  std::int64_t retry_min = 0;  // retry_after_ms in [retry_min, retry_max]
  std::int64_t retry_max = 0;
};

void run_steps(const std::vector<std::string>& flags, int limit, const std::vector<step>& steps) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    SCOPED_TRACE("step " + std::to_string(i + 1) + ": " + s.command + " " + shown(s.extra));
    const auto r = sluice(s.command, flags, s.extra);
    EXPECT_EQ(r.status, s.status) << r.err;
    EXPECT_EQ(r.err, "");
    ASSERT_FALSE(r.lines.empty()) << r.err;
    const auto& d = r.lines.back();
    EXPECT_EQ(d["allowed"], s.allowed);
    EXPECT_EQ(d["limit"], limit);
    EXPECT_EQ(d["remaining"], s.remaining);
    EXPECT_EQ(d["degraded"], false);
    const auto retry = d["retry_after_ms"].get<std::int64_t>();
    EXPECT_GE(retry, s.retry_min);
    EXPECT_LE(retry, s.retry_max);
  }
}

TEST(CliOperationsTest, PeekRefundPenalizeBlockAndResetABucket) {
  redis_server redis;
  // A token a 1000 s: nothing refills while the test runs.
  const std::vector<std::string> bucket{"--backend",           redis.url(), "--capacity", "3",
                                        "--refill-per-second", "0.001",     "--key",      "ops"};
  run_steps(bucket, 3,
            {
                {"check", {}, 0, true, 2},
                // peek answers what a check would, and spends nothing.
                {"peek", {}, 0, true, 2},
                {"peek", {}, 0, true, 2},
                {"check", {"--repeat", "2"}, 0, true, 0},
                // Used up: peek says denied, twice, with the wait for one token.
                {"peek", {}, 1, false, 0, 990'000, 1'000'000},
                {"peek", {}, 1, false, 0, 990'000, 1'000'000},
                // refund gives two back: the answer is what a check of one sees after.
                {"refund", {"--cost", "2"}, 0, true, 2},
                {"peek", {}, 0, true, 2},
                // penalize spends 3 of the 2 left: one below zero, so one token is two
                // tokens' wait away.
                {"penalize", {"--cost", "3"}, 0, false, 0, 1'990'000, 2'000'000},
                // block denies for its duration, whatever the state; check then says so too.
                {"block", {"--duration", "1500ms"}, 0, false, 0, 1'400, 1'500},
                {"check", {}, 1, false, 0, 1, 1'500},
                // reset: a new key, the whole burst again.
                {"reset", {}, 0, true, 3},
                {"check", {}, 0, true, 2},
            });
}

// The state's format depends on the algorithm, so the operations take its flags: a window.
TEST(CliOperationsTest, OperationsOnASlidingWindow) {
  redis_server redis;
  const std::vector<std::string> window{"--backend", redis.url(), "--algorithm", "sliding_window",
                                        "--limit",   "2",         "--window",    "1h",
                                        "--key",     "win"};
  run_steps(window, 2,
            {
                {"check", {"--repeat", "3"}, 1, false, 0, 3'590'000, 3'600'000},
                {"refund", {}, 0, true, 1},  // --cost 1 by default
                {"check", {}, 0, true, 0},
                {"penalize", {"--cost", "2"}, 0, false, 0, 3'590'000, 3'600'000},
                {"peek", {}, 1, false, 0, 3'590'000, 3'600'000},
                {"reset", {}, 0, true, 2},
                {"check", {"--repeat", "2"}, 0, true, 0},
            });
}

// Every wrong flag exits 2 with one line naming it, before any connection: the Redis behind
// --backend (a black hole) never sees one.
TEST(CliOperationsTest, InvalidFlagsExitTwoNamingTheFlag) {
  black_hole_server silent;
  const std::vector<std::string> bucket{"--capacity", "3", "--refill-per-second", "1"};
  const std::vector<std::string> window{"--algorithm", "fixed_window", "--limit",
                                        "2",           "--window",     "1m"};
  struct bad_flags {
    std::string command;
    std::vector<std::string> flags;
    std::string message;  // stderr exactly, or with `cli11` what it names
    bool cli11 = false;   // CLI11's own check: a flag the command does not take, one it needs
  };
  const std::string not_a_duration =
      " is not a duration: want a whole number and a unit ms, s, m, h or d (e.g. 250ms, 1s, "
      "1m, 1h, 1d)\n";
  auto with = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
    a.insert(a.end(), more);
    return a;
  };
  const std::vector<bad_flags> bad{
      {"refund", with(bucket, {"--cost", "4"}),
       "sluice: invalid input: --cost 4 exceeds --capacity 3 (a request may cost at most that)\n"},
      {"penalize", with(window, {"--cost", "3"}),
       "sluice: invalid input: --cost 3 exceeds --limit 2 (a request may cost at most that)\n"},
      {"peek", with(bucket, {"--cost", "4"}),
       "sluice: invalid input: --cost 4 exceeds --capacity 3 (a request may cost at most that)\n"},
      {"block", with(bucket, {"--duration", "1.5s"}),
       "sluice: --duration: \"1.5s\"" + not_a_duration},
      {"block", with(bucket, {"--duration", "1500"}),
       "sluice: --duration: \"1500\"" + not_a_duration},
      {"block", with(bucket, {"--duration", "0ms"}),
       "sluice: --duration: \"0ms\" is zero: a duration must be at least 1ms\n"},
      {"block", with(window, {"--duration", "367d"}),
       "sluice: invalid input: --duration: a block lasts 1 ms..366 days, got 367d\n"},
      {"reset", with(bucket, {"--limit", "5"}),
       "sluice: --limit is for sliding_window, sliding_window_counter and fixed_window; "
       "token_bucket takes --capacity and --refill-per-second\n"},
      {"reset",
       {"--algorithm", "fixed_window", "--limit", "5"},
       "sluice: --window is required with --algorithm fixed_window (e.g. --window 1m)\n"},
      {"refund",
       {"--algorithm", "gcra", "--capacity", "5"},
       "sluice: --refill-per-second is required with --algorithm gcra\n"},
      {"block",
       {"--algorithm", "leaky_bucket", "--limit", "2", "--window", "1m", "--duration", "1s"},
       "sluice: --algorithm must be token_bucket, gcra, sliding_window, sliding_window_counter "
       "or fixed_window, got \"leaky_bucket\"\n"},
      {"reset", with(bucket, {"--cost", "1"}), "--cost", true},
      {"block", bucket, "--duration", true},
      {"refund", with(bucket, {"--cost", "0"}), "--cost", true},
      {"penalize", with(bucket, {"--cost", "-1"}), "--cost", true},
      {"reset", with(bucket, {"--on-failure", "closed"}), "--on-failure", true},
      {"refund", with(bucket, {"--repeat", "2"}), "--repeat", true},
  };
  for (const auto& b : bad) {
    auto args = b.flags;
    for (const auto& a : {"--key", "k", "--backend"}) args.push_back(a);
    args.push_back(silent.url());
    SCOPED_TRACE(b.command + " " + shown(args));
    const auto r = sluice(b.command, args);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.out, "");
    if (b.cli11) {
      EXPECT_NE(r.err.find(b.message), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(r.err, b.message);
    }
  }
  const auto no_key = sluice("reset", bucket);
  EXPECT_EQ(no_key.status, 2);
  EXPECT_NE(no_key.err.find("--key"), std::string::npos) << no_key.err;
  EXPECT_EQ(silent.accepted(), 0u);
}

// An operation is not a decision, so no failure mode answers for a backend that fails: exit 3
// and the reason on stderr, nothing on stdout. peek is a decision: its failure mode answers.
TEST(CliOperationsTest, ABackendThatFailsExitsThree) {
  black_hole_server silent;  // accepts, never answers: a timeout
  const std::vector<std::string> policy{"--capacity", "3", "--refill-per-second", "1",
                                        "--key",      "k", "--timeout-ms",        "100"};
  const std::vector<std::vector<std::string>> operations{{"reset"},
                                                         {"refund", "--cost", "1"},
                                                         {"penalize", "--cost", "2"},
                                                         {"block", "--duration", "1s"}};
  for (const auto& backend : {std::string("redis://127.0.0.1:1"), silent.url()}) {
    for (const auto& op : operations) {
      auto args = op;
      args.insert(args.end(), policy.begin(), policy.end());
      args.push_back("--backend");
      args.push_back(backend);
      SCOPED_TRACE(shown(args));
      const auto r = run_sluice(args);
      EXPECT_EQ(r.status, 3);
      EXPECT_EQ(r.out, "");
      EXPECT_NE(r.err.find("sluice: backend failed: backend "), std::string::npos) << r.err;
    }
  }
  auto peek =
      sluice("peek", policy, {"--backend", "redis://127.0.0.1:1", "--on-failure", "closed"});
  EXPECT_EQ(peek.status, 1) << peek.err;
  ASSERT_EQ(peek.lines.size(), 1u) << peek.err;
  EXPECT_EQ(peek.lines[0]["degraded"], true);
  EXPECT_EQ(peek.lines[0]["allowed"], false);
}

}  // namespace
}  // namespace sluice::test
