// `sluice simulate`: the library's decisions on a simulated clock against synthetic traffic,
// with counts worked out by hand, deterministic random traffic, traffic from a file, the SVG
// picture, and every bad input exiting 2 with a message naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace sluice::test {
namespace {

cli_result simulate(std::vector<std::string> args) {
  args.insert(args.begin(), "simulate");
  return run_sluice(args);
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const std::vector<std::string> fixed_10_per_s{"--algorithm", "fixed_window", "--limit",
                                              "10",          "--window",     "1s"};

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more);
  return a;
}

// The line `sluice simulate` prints, field by field in its order.
struct summary {
  std::string algorithm;
  std::string traffic;
  int duration_ms = 0;
  int requests = 0;
  int allowed = 0;
  int denied = 0;
  int longest_denied_run = 0;
  nlohmann::json first_denied_ms;
  int window_ms = 0;
  int max_allowed_in_any_window = 0;

  std::string line() const {
    nlohmann::ordered_json j;
    j["algorithm"] = algorithm;
    j["traffic"] = traffic;
    j["duration_ms"] = duration_ms;
    j["requests"] = requests;
    j["allowed"] = allowed;
    j["denied"] = denied;
    j["longest_denied_run"] = longest_denied_run;
    j["first_denied_ms"] = first_denied_ms;
    j["window_ms"] = window_ms;
    j["max_allowed_in_any_window"] = max_allowed_in_any_window;
    return j.dump() + "\n";
  }
};

// 20 a second against 10 per aligned second: the first half of every second is admitted.
TEST(CliSimulateTest, SteadyTrafficAgainstAFixedWindow) {
  const auto r = simulate(with(fixed_10_per_s, {"--traffic", "steady:20", "--duration", "10s"}));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "{\"algorithm\":\"fixed_window\",\"traffic\":\"steady:20\",\"duration_ms\":10000,"
            "\"requests\":200,\"allowed\":100,\"denied\":100,\"longest_denied_run\":10,"
            "\"first_denied_ms\":500,\"window_ms\":1000,\"max_allowed_in_any_window\":10}\n");
  EXPECT_EQ(r.out,
            (summary{"fixed_window", "steady:20", 10000, 200, 100, 100, 10, 500, 1000, 10}.line()));
  // An exact sliding window admits the same: each admission leaves the window a second later,
  // just as the next second's request comes.
  const auto sliding = simulate({"--algorithm", "sliding_window", "--limit", "10", "--window", "1s",
                                 "--traffic", "steady:20", "--duration", "10s"});
  EXPECT_EQ(
      sliding.out,
      (summary{"sliding_window", "steady:20", 10000, 200, 100, 100, 10, 500, 1000, 10}.line()));
  // The default --duration is a minute; a fractional rate is one request every 2 s.
  const auto slow = simulate(with(fixed_10_per_s, {"--traffic", "steady:0.5"}));
  EXPECT_EQ(slow.out,
            (summary{"fixed_window", "steady:0.5", 60000, 30, 30, 0, 0, nullptr, 1000, 1}.line()));
}

// Bursts of 10 every 10 s against a bucket of 5 refilling 1/s: full again at each burst, so
// 5 allowed and 5 denied at 0, 10 and 20 s. gcra decides alike (the rate divides 10^6).
TEST(CliSimulateTest, BurstsAgainstABucket) {
  for (const std::string algorithm : {"token_bucket", "gcra"}) {
    SCOPED_TRACE(algorithm);
    const auto r = simulate({"--algorithm", algorithm, "--capacity", "5", "--refill-per-second",
                             "1", "--traffic", "burst:10@10s", "--duration", "30s"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, (summary{algorithm, "burst:10@10s", 30000, 30, 15, 15, 5, 0, 1000, 5}.line()));
  }
  // With --cost 2 a burst of 10 takes 2 (4 of 5 tokens), then 1 refills a second: at 10 s
  // the bucket is full again. The window's count is in units (requests x cost).
  const auto costly = simulate({"--capacity", "5", "--refill-per-second", "1", "--cost", "2",
                                "--traffic", "burst:10@10s", "--duration", "30s"});
  EXPECT_EQ(costly.out,
            (summary{"token_bucket", "burst:10@10s", 30000, 30, 6, 24, 8, 0, 1000, 4}.line()));
}

// A boundary burst: the counter approximation admits more than its limit in a sliding
// window, never more than the limit in an aligned one.
TEST(CliSimulateTest, SlidingWindowCounterStaysWithinItsBound) {
  const auto r = simulate({"--algorithm", "sliding_window_counter", "--limit", "10", "--window",
                           "1s", "--traffic", "poisson:40", "--duration", "30s"});
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  EXPECT_LE(r.lines[0]["allowed"].get<int>(), 300);
  EXPECT_LT(r.lines[0]["max_allowed_in_any_window"].get<int>(), 20);
  const auto exact = simulate({"--algorithm", "sliding_window", "--limit", "10", "--window", "1s",
                               "--traffic", "poisson:40", "--duration", "30s"});
  ASSERT_EQ(exact.lines.size(), 1u) << exact.err;
  EXPECT_EQ(exact.lines[0]["max_allowed_in_any_window"], 10);
}

TEST(CliSimulateTest, PoissonTrafficIsTheSameForTheSameSeed) {
  const auto args = with(fixed_10_per_s, {"--traffic", "poisson:100", "--duration", "100s"});
  const auto a = simulate(with(args, {"--seed", "7"}));
  const auto b = simulate(with(args, {"--seed", "7"}));
  const auto c = simulate(with(args, {"--seed", "8"}));
  const auto one = simulate(with(args, {"--seed", "1"}));
  const auto unseeded = simulate(args);
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(a.lines.size(), 1u) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(one.out, unseeded.out) << "--seed 1 is the default";
  // 10,000 expected; six standard deviations are 600.
  const auto n = a.lines[0]["requests"].get<int>();
  EXPECT_GT(n, 9'400);
  EXPECT_LT(n, 10'600);
  EXPECT_EQ(a.lines[0]["allowed"], 1'000) << "10 in each of 100 seconds";
}

TEST(CliSimulateTest, TrafficFromAFileWithCommentsInAnyOrder) {
  const auto dir = make_temp_dir("sluice-simulate");
  const auto path = write_file(dir + "/times.txt",
                               "# request times in ms from 0\n"
                               "1500\n"
                               "  100\n"
                               "200   # a trailing comment\n"
                               "\n"
                               "300\r\n"
                               "1999.5\n"
                               "2000\n");
  const auto r = simulate({"--algorithm", "fixed_window", "--limit", "2", "--window", "1s",
                           "--traffic", "file:" + path, "--duration", "3s"});
  EXPECT_EQ(r.status, 0) << r.err;
  // Sorted: 100, 200 | 300 denied | 1500, 1999.5 | 2000: a fixed window admits 3 in the
  // second that ends at 2000.
  EXPECT_EQ(r.out,
            (summary{"fixed_window", "file:" + path, 3000, 6, 5, 1, 1, 300, 1000, 3}.line()));
  const auto fraction = write_file(dir + "/fraction.txt", "0.25\n0\n0.125\n");
  const auto f = simulate({"--capacity", "2", "--refill-per-second", "1", "--traffic",
                           "file:" + fraction, "--duration", "1s"});
  ASSERT_EQ(f.lines.size(), 1u) << f.err;
  EXPECT_EQ(f.lines[0]["first_denied_ms"], 0.25);
}

TEST(CliSimulateTest, BadTrafficFilesExitTwoNamingTheLine) {
  const auto dir = make_temp_dir("sluice-simulate");
  struct bad_file {
    std::string text;
    std::string reason;  // after "sluice: --traffic file:PATH: "
  };
  const std::string not_a_time =
      " is not a time in milliseconds from 0 (a whole number, or up to three decimals: 250, "
      "12.5)\n";
  const std::vector<bad_file> bad{
      {"100\n# fine\n12ms\n", "line 3: \"12ms\"" + not_a_time},
      {"-5\n", "line 1: \"-5\"" + not_a_time},
      {"1.2345\n", "line 1: \"1.2345\"" + not_a_time},
      {"1.\n", "line 1: \"1.\"" + not_a_time},
      {"1 2\n", "line 1: \"1 2\"" + not_a_time},
      {"100\n3000\n", "line 2: 3000 ms is not before --duration 3s\n"},
      {"99999999999999999999\n", "line 1: 99999999999999999999 ms is not before --duration 3s\n"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.text);
    const auto path = write_file(dir + "/bad.txt", b.text);
    const auto r =
        simulate(with(fixed_10_per_s, {"--traffic", "file:" + path, "--duration", "3s"}));
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "sluice: --traffic file:" + path + ": " + b.reason);
  }
  const auto missing = simulate(with(fixed_10_per_s, {"--traffic", "file:" + dir + "/none"}));
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err, "sluice: --traffic file:" + dir + "/none: cannot read " + dir +
                             "/none: No such file or directory\n");
  const auto directory = simulate(with(fixed_10_per_s, {"--traffic", "file:" + dir}));
  EXPECT_EQ(directory.status, 2);
  EXPECT_EQ(directory.err,
            "sluice: --traffic file:" + dir + ": cannot read " + dir + ": it is a directory\n");
}

TEST(CliSimulateTest, InvalidFlagsExitTwoWithAMessage) {
  const std::string shapes =
      "sluice: --traffic must be steady:RATE, burst:N@PERIOD, poisson:RATE or file:PATH (RATE "
      "in requests per second, PERIOD a duration such as 10s), got ";
  const auto rate = [](const std::string& spec, const std::string& got) {
    return "sluice: --traffic " + spec +
           ": RATE must be a number of requests per second above 0 and at most 1000000 (e.g. 20 "
           "or 0.5), got \"" +
           got + "\"\n";
  };
  struct bad_flags {
    std::vector<std::string> flags;  // after the policy
    std::string message;
  };
  const std::vector<bad_flags> bad{
      {{"--traffic", "steady"}, shapes + "\"steady\"\n"},
      {{"--traffic", "constant:5"}, shapes + "\"constant:5\"\n"},
      {{"--traffic", "steady:0"}, rate("steady:0", "0")},
      {{"--traffic", "steady:-1"}, rate("steady:-1", "-1")},
      {{"--traffic", "steady:"}, rate("steady:", "")},
      {{"--traffic", "steady:2000000"}, rate("steady:2000000", "2000000")},
      {{"--traffic", "poisson:abc"}, rate("poisson:abc", "abc")},
      {{"--traffic", "poisson:nan"}, rate("poisson:nan", "nan")},
      {{"--traffic", "poisson:5/s"}, rate("poisson:5/s", "5/s")},
      {{"--traffic", "burst:10"},
       "sluice: --traffic burst:10: want burst:N@PERIOD (e.g. burst:10@1s)\n"},
      {{"--traffic", "burst:0@1s"},
       "sluice: --traffic burst:0@1s: N must be a whole number 1..10000000, got \"0\"\n"},
      {{"--traffic", "burst:x@1s"},
       "sluice: --traffic burst:x@1s: N must be a whole number 1..10000000, got \"x\"\n"},
      {{"--traffic", "burst:10@1x"},
       "sluice: --traffic burst:10@1x: PERIOD: \"1x\" is not a duration: want a whole number and a "
       "unit ms, s, m, h or d (e.g. 250ms, 1s, 1m, 1h, 1d)\n"},
      {{"--traffic", "burst:10@400d"},
       "sluice: --traffic burst:10@400d: PERIOD must be at most 366d\n"},
      {{"--traffic", "file:"}, "sluice: --traffic file:: PATH is empty\n"},
      {{"--traffic", "steady:1", "--duration", "0s"},
       "sluice: --duration: \"0s\" is zero: a duration must be at least 1ms\n"},
      {{"--traffic", "steady:1", "--duration", "400d"},
       "sluice: --duration: a simulation lasts 1ms..366d, got 400d\n"},
      {{"--traffic", "steady:1", "--seed", "3"}, "sluice: --seed is for poisson: traffic only\n"},
      // At most 10^7 requests, refused before any work.
      {{"--traffic", "steady:1000000", "--duration", "1h"},
       "sluice: --traffic steady:1000000: about 3600000000 requests in --duration 1h, more than "
       "a simulation takes (10000000)\n"},
      {{"--traffic", "burst:10000000@1s", "--duration", "2s"},
       "sluice: --traffic burst:10000000@1s: about 20000000 requests in --duration 2s, more than "
       "a simulation takes (10000000)\n"},
      // The policy flags are check's, with check's messages.
      {{"--traffic", "steady:1", "--capacity", "5"},
       "sluice: --capacity is for token_bucket and gcra; fixed_window takes --limit and "
       "--window\n"},
      {{"--traffic", "steady:1", "--cost", "11"},
       "sluice: invalid input: --cost 11 exceeds --limit 10 (a request may cost at most that)\n"},
  };
  for (const auto& b : bad) {
    auto all = fixed_10_per_s;
    all.insert(all.end(), b.flags.begin(), b.flags.end());
    SCOPED_TRACE(shown(all));
    const auto r = simulate(all);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, b.message);
  }
  // CLI11's checks: a backend and a key are not simulate's; --traffic is required.
  for (const auto& [flags, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--traffic", "steady:1", "--backend", "memory"}, "--backend"},
           {{"--traffic", "steady:1", "--key", "k"}, "--key"},
           {{"--traffic", "steady:1", "--on-failure", "closed"}, "--on-failure"},
           {{}, "--traffic"},
       }) {
    auto all = fixed_10_per_s;
    all.insert(all.end(), flags.begin(), flags.end());
    SCOPED_TRACE(shown(all));
    const auto r = simulate(all);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  }
}

bool has_python3() { return ::access("/usr/bin/python3", X_OK) == 0; }

TEST(CliSimulateTest, SvgIsSelfContainedWellFormedAndEscaped) {
  // A file name with XML's special characters ends up in the title, escaped.
  const auto dir = make_temp_dir("sluice-simulate");
  const auto traffic = write_file(dir + "/a&b<c>\"d'.txt", "0\n100\n200\n300\n1500\n");
  const auto svg = dir + "/out.svg";
  const auto r = simulate({"--algorithm", "fixed_window", "--limit", "2", "--window", "1s",
                           "--traffic", "file:" + traffic, "--duration", "3s", "--svg", svg});
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  EXPECT_EQ(r.lines[0]["allowed"], 3);
  const auto text = read_file_text(svg);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << text.substr(0, 80);
  EXPECT_EQ(text.substr(text.size() - 7), "</svg>\n");
  const auto title = "fixed_window: limit 2 per 1s; traffic file:" + dir +
                     "/a&amp;b&lt;c&gt;&quot;d&apos;.txt for 3s";
  EXPECT_NE(text.find("<title>" + title + "</title>"), std::string::npos) << text;
  EXPECT_EQ(text.find("a&b"), std::string::npos);
  for (const auto* absent : {"<script", "href", "url(", "<image", "<style", "<foreignObject"}) {
    EXPECT_EQ(text.find(absent), std::string::npos) << absent;
  }
  for (const auto* present :
       {"allowed (3)", "denied (2)", "time (s)", ">remaining<", "remaining after each request"}) {
    EXPECT_NE(text.find(present), std::string::npos) << present;
  }

  if (!has_python3()) GTEST_SKIP() << "no /usr/bin/python3 to parse the SVG with";
  process_child py({"/usr/bin/python3", "-c",
                    "import sys, xml.etree.ElementTree as E\n"
                    "r = E.parse(sys.argv[1]).getroot()\n"
                    "ns = '{http://www.w3.org/2000/svg}'\n"
                    "print(r.tag, r.get('width'), r.get('height'))\n"
                    "print(r.find(ns + 'title').text)\n"
                    "paths = r.findall(ns + 'path')\n"
                    "print(len(paths), sorted({p.get('stroke') for p in paths}))\n",
                    svg},
                   "python3");
  EXPECT_EQ(py.wait(std::chrono::seconds{30}), 0) << py.stderr_text();
  const auto unescaped =
      "fixed_window: limit 2 per 1s; traffic file:" + dir + "/a&b<c>\"d'.txt for 3s";
  EXPECT_EQ(py.stdout_text(), "{http://www.w3.org/2000/svg}svg 960 380\n" + unescaped +
                                  "\n3 ['#1a9641', '#2c7bb6', '#d7191c']\n");
}

// A picture's size does not grow with the traffic: ticks are counted per pixel column.
TEST(CliSimulateTest, SvgStaysSmallForAMillionRequests) {
  const auto svg = make_temp_dir("sluice-simulate") + "/big.svg";
  const auto r = simulate({"--capacity", "100", "--refill-per-second", "5000", "--traffic",
                           "poisson:10000", "--duration", "100s", "--svg", svg});
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.lines.size(), 1u) << r.err;
  EXPECT_GT(r.lines[0]["requests"].get<int>(), 990'000);
  const auto text = read_file_text(svg);
  EXPECT_GT(text.size(), 1'000u);
  EXPECT_LT(text.size(), 100'000u);
  const auto unwritable = simulate({"--capacity", "1", "--refill-per-second", "1", "--traffic",
                                    "steady:1", "--svg", "/nonexistent/dir/x.svg"});
  EXPECT_EQ(unwritable.status, 2);
  EXPECT_EQ(unwritable.err,
            "sluice: --svg: cannot write /nonexistent/dir/x.svg: No such file or directory\n");
}

// Four instances sharing a limit through leases: what they admit together is what one
// limiter admits, within the stated bound, and most decisions are taken without asking.
TEST(CliSimulateTest, InstancesWithLeasesStayWithinTheBound) {
  const std::vector<std::string> bucket{"--capacity", "1000",        "--refill-per-second", "1000",
                                        "--traffic",  "steady:5000", "--duration",          "10s"};
  const auto one = nlohmann::json::parse(simulate(bucket).out);
  const auto r = simulate(with(bucket, {"--instances", "4", "--lease-ttl", "50ms"}));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto four = nlohmann::json::parse(r.out);
  EXPECT_EQ(four["instances"], 4);
  EXPECT_EQ(four["lease_ttl_ms"], 50);
  EXPECT_EQ(four["lease_bound_extra"], 50);  // 1000/s x 50 ms
  const int allowed = four["allowed"].get<int>();
  EXPECT_LE(allowed, one["allowed"].get<int>() + 50);
  EXPECT_GE(allowed, one["allowed"].get<int>() * 95 / 100);
  EXPECT_LE(four["max_allowed_in_any_window"].get<int>(),
            one["max_allowed_in_any_window"].get<int>() + 50);
  EXPECT_GT(four["leased_decisions"].get<int>(), 40'000);
  EXPECT_LT(four["lease_asks"].get<int>(), 5'000);
  // A lease_ttl past an hour is refused by name.
  const auto bad = simulate(with(bucket, {"--lease-ttl", "2h"}));
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--lease-ttl"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace sluice::test
