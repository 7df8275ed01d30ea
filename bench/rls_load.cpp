// sluice_bench_rls: ShouldRateLimit calls/s and latency against sluiced's Envoy rate limit
// service (docs/BENCHMARKS.md, part f), for a fixed time; prints one line of `name=value`
// fields per stream count that scripts/bench parses.
//
//   sluice_bench_rls --target 127.0.0.1:PORT [--streams 1,50,500] [--descriptors 1|3]
//                    [--keys 10000] [--seconds 5] [--warmup 1] [--channels 2]
//                    [--domain bench] [--rate CALLS_PER_SEC] [--client h2|grpc]
//
// --client (rls_transport.hpp): `h2` (default), gRPC's wire format over nghttp2 on one
// thread, light enough that on a shared machine the figure is the server's; `grpc`, gRPC's
// own C++ client, about as heavy as the server.
//
// Closed loop (no --rate, or --rate 0): N streams each send one call after another, the next
// from the completion of the previous (as Envoy's workers do for the requests they hold).
// At saturation its p99 is largely calls queueing behind one another: it says how fast
// sluiced goes, not how long a call waits when calls arrive at the rate of user traffic.
//
// Open loop (--rate R): R calls/s in all, spread evenly over the N streams (call j of the
// run is meant to go out at start + j/R, on stream j mod N), whatever the answers do. The
// latency of a call is from the time it was meant to go out, not the time it did (as wrk2
// does it): a stall then counts against every call it held back instead of delaying the
// schedule and vanishing from the percentiles (coordinated omission). A stream keeps one
// call in flight; a call that comes due while the previous one is unanswered is late and
// goes out as soon as that answer arrives. The line adds `rate=` (the target), `late=`
// (calls of the measured window sent late), `unsent=` (calls still owed when the window
// plus as long again is over, given up) and `send_lag_p99_us=` (how long after their time
// the window's calls went out, late or not; with few late calls, the part of the latency
// that is the tool's own, a busy machine waking its timer late included); `per_sec=` is
// then the rate achieved (answers that arrived within the window), `calls=` the calls meant
// for the window (their latencies, each awaited however late).
//
// Each request carries domain `bench` and either one descriptor {client: k:<i>} or three:
// {client: k:<i>}, {tenant: t:<i mod 100>}, {route: /api/v1}; <i> is a random key of
// --keys. scripts/bench writes the limits file these match. Calls are spread over
// --channels HTTP/2 connections (Envoy opens one per worker thread).
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls_transport.hpp"

namespace {

namespace rls = envoy::service::ratelimit::v3;
using steady = std::chrono::steady_clock;

struct options {
  std::string target;
  std::vector<int> streams{1, 50, 500};
  int descriptors = 1;
  std::uint64_t keys = 10'000;
  double seconds = 5;
  double warmup = 1;
  int channels = 2;
  std::string domain = "bench";
  double rate = 0;            // calls/s in all; 0: closed loop
  std::string client = "h2";  // rls_transport.hpp: h2 | grpc
};

// Closed loop: calls started from `from` and answered by `until`. Open loop: calls due in
// [from, until), however late they went out or were answered.
struct window {
  steady::time_point from;
  steady::time_point until;
};

// Open loop: when each call of a run is meant to go out. One formula for the driver that
// says a call is due and the stream that sends it, so both agree on every call's time.
struct schedule {
  steady::time_point start;
  double rate;                    // calls/s over all streams
  std::size_t streams;            // call j goes on stream j mod streams
  steady::time_point stop_after;  // a backlog still owed here is given up (a dead server)

  steady::time_point at(std::uint64_t j) const {
    return start + std::chrono::duration_cast<steady::duration>(
                       std::chrono::duration<double>(static_cast<double>(j) / rate));
  }
};

// What the streams saw inside the measured window, and every call completed (warm-up
// included). Callbacks run on the transport's threads: a stream's own tally is touched by one
// callback at a time (its calls are sequential); the tallies are merged at the end.
struct tally {
  std::vector<std::uint32_t> latency_ns;
  std::uint64_t ok = 0;
  std::uint64_t over_limit = 0;
  std::uint64_t errors = 0;
  std::uint64_t completed = 0;
  std::string first_error;
  // Open loop only.
  std::vector<std::uint32_t> send_lag_ns;  // sent - due: how far the tool kept its schedule
  std::uint64_t answered_in_window = 0;    // whenever sent: the rate achieved
  std::uint64_t late = 0;
  std::uint64_t unsent = 0;

  void merge(tally&& o) {
    latency_ns.insert(latency_ns.end(), o.latency_ns.begin(), o.latency_ns.end());
    ok += o.ok;
    over_limit += o.over_limit;
    errors += o.errors;
    completed += o.completed;
    if (first_error.empty()) first_error = std::move(o.first_error);
    send_lag_ns.insert(send_lag_ns.end(), o.send_lag_ns.begin(), o.send_lag_ns.end());
    answered_in_window += o.answered_in_window;
    late += o.late;
    unsent += o.unsent;
  }
};

// xorshift: a cheap per-stream random key index.
class index_source {
 public:
  explicit index_source(std::uint64_t seed) : x_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    x_ ^= x_ << 13;
    x_ ^= x_ >> 7;
    x_ ^= x_ << 17;
    return x_;
  }

 private:
  std::uint64_t x_;
};

void set_entry(rls::RateLimitRequest& req, int d, std::string_view key, std::string value) {
  auto* e = req.mutable_descriptors(d)->mutable_entries(0);
  e->set_key(std::string(key));
  e->set_value(std::move(value));
}

// 32 bits keep a long run's samples small; anything past 4.29 s counts as 4.29 s.
std::uint32_t ns_since(steady::time_point t0, steady::time_point t1) {
  return static_cast<std::uint32_t>(std::min<std::int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(), UINT32_MAX));
}

// One stream: a chain of calls, each with its own context (gRPC forbids reusing one). In
// the closed loop each answer sends the next call; in the open loop (`plan_` set) the driver
// says when a call is due and an answer sends only a call that is already late.
class stream {
 public:
  stream(sluice::bench::rls_transport& transport, const options& o, std::size_t index, window w,
         const schedule* plan, std::function<void()> on_end)
      : transport_(transport),
        o_(o),
        src_(index + 1),
        index_(index),
        w_(w),
        plan_(plan),
        on_end_(std::move(on_end)) {
    req_.set_domain(o.domain);
    for (int d = 0; d < o.descriptors; ++d) req_.add_descriptors()->add_entries();
    if (o.descriptors > 1) set_entry(req_, 2, "route", "/api/v1");
  }

  // Closed loop: the next call, timed from now.
  void next() { send(steady::now()); }

  // Open loop, from the driver: this stream's next call is due now. Sent at once unless the
  // previous call is unanswered; then its answer sends this one, late.
  void due() {
    steady::time_point intended;
    {
      std::lock_guard lock(m_);
      ++due_;
      if (in_flight_) return;
      in_flight_ = true;
      intended = take_next();
    }
    send(intended);
  }

  // Open loop, from the driver: no call will come due any more. The stream ends when its
  // last call is answered, or now if none is in flight.
  void close() {
    bool idle;
    {
      std::lock_guard lock(m_);
      closed_ = true;
      idle = !in_flight_;
    }
    if (idle) on_end_();
  }

  tally& result() { return t_; }

 private:
  // t0: when the call counts from (sent, or in the open loop meant to be sent).
  void send(steady::time_point t0) {
    const auto i = src_.next() % o_.keys;
    set_entry(req_, 0, "client", "k:" + std::to_string(i));
    if (o_.descriptors > 1) set_entry(req_, 1, "tenant", "t:" + std::to_string(i % 100));
    t0_ = t0;
    if (plan_ && in_window(t0)) t_.send_lag_ns.push_back(ns_since(t0, steady::now()));
    transport_.call(index_, req_, [this](const sluice::bench::call_result& r) { done(r); });
  }

  void done(const sluice::bench::call_result& s) {
    const auto t1 = steady::now();
    ++t_.completed;
    if (plan_) return done_open(s, t1);
    if (t0_ >= w_.from && t1 <= w_.until) record(s, t1);
    if (t1 < w_.until) return next();
    on_end_();
  }

  // Every call meant for the window is recorded, however late its answer: leaving out the
  // slow ones at the end would hide a stall there.
  void done_open(const sluice::bench::call_result& s, steady::time_point t1) {
    if (t1 >= w_.from && t1 < w_.until) ++t_.answered_in_window;
    if (in_window(t0_)) record(s, t1);
    steady::time_point late_call;
    bool send_late = false;
    bool end = false;
    {
      // Nothing of this call is touched after the lock: once idle, the driver may send.
      std::lock_guard lock(m_);
      if (sent_ < due_ && t1 >= plan_->stop_after) {
        t_.unsent += due_ - sent_;
        sent_ = due_;
      }
      in_flight_ = sent_ < due_;
      send_late = in_flight_;
      if (send_late) late_call = take_next();
      end = !in_flight_ && closed_;
      if (send_late && in_window(late_call)) ++t_.late;
    }
    if (send_late) return send(late_call);
    if (end) on_end_();
  }

  // The intended time of this stream's next unsent call (under m_).
  steady::time_point take_next() { return plan_->at(sent_++ * plan_->streams + index_); }

  bool in_window(steady::time_point t) const { return t >= w_.from && t < w_.until; }

  void record(const sluice::bench::call_result& s, steady::time_point t1) {
    t_.latency_ns.push_back(ns_since(t0_, t1));
    if (!s.ok) {
      ++t_.errors;
      if (t_.first_error.empty()) t_.first_error = s.error;
    } else if (s.over_limit) {
      ++t_.over_limit;
    } else {
      ++t_.ok;
    }
  }

  sluice::bench::rls_transport& transport_;
  const options& o_;
  index_source src_;
  std::size_t index_;
  window w_;
  const schedule* plan_;  // null: closed loop
  std::function<void()> on_end_;
  rls::RateLimitRequest req_;
  steady::time_point t0_;
  tally t_;
  // Open loop: the driver's thread and the transport's meet here.
  std::mutex m_;
  std::uint64_t due_ = 0;   // calls that came due
  std::uint64_t sent_ = 0;  // calls sent (or given up)
  bool in_flight_ = false;
  bool closed_ = false;
};

// Open loop: says each call is due at its time, on this thread. A wake-up that comes late
// (the machine is busy) sends the calls it passed at once; their latency still counts from
// the time they were due.
void drive(std::vector<std::unique_ptr<stream>>& all, const schedule& plan,
           steady::time_point until) {
  for (std::uint64_t j = 0;; ++j) {
    const auto at = plan.at(j);
    if (at >= until) break;
    std::this_thread::sleep_until(at);
    all[j % all.size()]->due();
  }
  for (auto& s : all) s->close();
}

// The streams go to `keep`, which outlives them: the transport may still be returning from a
// stream's last callback when the run is over. `plan`: the open loop's, or null.
tally run(sluice::bench::rls_transport& transport, const options& o, int streams, window w,
          const schedule* plan, std::vector<std::unique_ptr<stream>>& keep) {
  std::mutex m;
  std::condition_variable cv;
  int live = streams;
  auto on_end = [&] {
    std::lock_guard lock(m);
    if (--live == 0) cv.notify_one();
  };
  std::vector<std::unique_ptr<stream>> all;
  for (std::size_t s = 0; s < static_cast<std::size_t>(streams); ++s)
    all.push_back(std::make_unique<stream>(transport, o, s, w, plan, on_end));
  if (plan) {
    drive(all, *plan, w.until);
  } else {
    for (auto& s : all) s->next();
  }
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return live == 0; });
  }
  tally t;
  for (auto& s : all) t.merge(std::move(s->result()));
  for (auto& s : all) keep.push_back(std::move(s));
  return t;
}

double percentile_us(std::vector<std::uint32_t>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] / 1000.0;
}

// One line for scripts/bench; the closed loop's as it always was, the open loop's with its
// own fields after it.
void print(const options& o, int streams, tally& t) {
  const auto n = t.latency_ns.size();
  const auto answered = o.rate > 0 ? t.answered_in_window : n;
  std::printf(
      "streams=%d descriptors=%d keys=%llu seconds=%.1f calls=%zu per_sec=%.0f p50_us=%.1f "
      "p99_us=%.1f p999_us=%.1f over_limit=%llu errors=%llu completed=%llu",
      streams, o.descriptors, static_cast<unsigned long long>(o.keys), o.seconds, n,
      static_cast<double>(answered) / o.seconds, percentile_us(t.latency_ns, 0.50),
      percentile_us(t.latency_ns, 0.99), percentile_us(t.latency_ns, 0.999),
      static_cast<unsigned long long>(t.over_limit), static_cast<unsigned long long>(t.errors),
      static_cast<unsigned long long>(t.completed));
  if (o.rate > 0) {
    std::printf(" rate=%.0f late=%llu unsent=%llu send_lag_p99_us=%.1f", o.rate,
                static_cast<unsigned long long>(t.late), static_cast<unsigned long long>(t.unsent),
                percentile_us(t.send_lag_ns, 0.99));
  }
  std::printf("\n");
}

int positive_int(std::string_view s, std::string_view what) {
  int v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size() || v <= 0)
    throw std::invalid_argument("bad " + std::string(what) + ": " + std::string(s));
  return v;
}

std::vector<int> parse_list(std::string_view s) {
  std::vector<int> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    out.push_back(positive_int(s.substr(0, comma), "--streams"));
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
  }
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "--target") {
      o.target = value();
    } else if (a == "--streams") {
      o.streams = parse_list(value());
    } else if (a == "--descriptors") {
      o.descriptors = positive_int(value(), a);
    } else if (a == "--keys") {
      o.keys = static_cast<std::uint64_t>(positive_int(value(), a));
    } else if (a == "--seconds") {
      o.seconds = std::stod(value());
    } else if (a == "--warmup") {
      o.warmup = std::stod(value());
    } else if (a == "--channels") {
      o.channels = positive_int(value(), a);
    } else if (a == "--domain") {
      o.domain = value();
    } else if (a == "--rate") {
      o.rate = std::stod(value());
    } else if (a == "--client") {
      o.client = value();
    } else {
      throw std::invalid_argument("unknown argument " + std::string(a));
    }
  }
  if (o.target.empty()) throw std::invalid_argument("--target HOST:PORT is required");
  if (o.descriptors != 1 && o.descriptors != 3) throw std::invalid_argument("--descriptors 1|3");
  if (o.client != "h2" && o.client != "grpc") throw std::invalid_argument("--client h2|grpc");
  if (o.seconds <= 0 || o.warmup < 0) throw std::invalid_argument("bad --seconds or --warmup");
  if (!std::isfinite(o.rate) || o.rate < 0)
    throw std::invalid_argument("bad --rate (calls/s; 0: closed loop)");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto o = parse(argc, argv);
    auto transport = o.client == "grpc" ? sluice::bench::make_grpc_transport(o.target, o.channels)
                                        : sluice::bench::make_h2_transport(o.target, o.channels);
    std::vector<std::unique_ptr<stream>> ended;
    for (int streams : o.streams) {
      const auto start = steady::now();
      auto at = [&](double s) {
        return start +
               std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
      };
      const window w{at(o.warmup), at(o.warmup + o.seconds)};
      const schedule plan{start, o.rate, static_cast<std::size_t>(streams),
                          at(o.warmup + 2 * o.seconds)};
      auto t = run(*transport, o, streams, w, o.rate > 0 ? &plan : nullptr, ended);
      print(o, streams, t);
      if (!t.first_error.empty())
        std::fprintf(stderr, "sluice_bench_rls: first error: %s\n", t.first_error.c_str());
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice_bench_rls: %s\n", e.what());
    return 1;
  }
}
