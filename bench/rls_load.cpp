// sluice_bench_rls: ShouldRateLimit calls/s and latency against sluiced's Envoy rate limit
// service (docs/BENCHMARKS.md, part f). N concurrent streams each send one call after
// another (the next from the completion of the previous, as Envoy's workers do for the
// requests they hold), for a fixed time, on gRPC's callback API; prints one line of
// `name=value` fields that scripts/bench parses.
//
//   sluice_bench_rls --target 127.0.0.1:PORT [--streams 1,50,500] [--descriptors 1|3]
//                    [--keys 10000] [--seconds 5] [--warmup 1] [--channels 2]
//                    [--domain bench]
//
// Each request carries domain `bench` and either one descriptor {client: k:<i>} or three:
// {client: k:<i>}, {tenant: t:<i mod 100>}, {route: /api/v1}; <i> is a random key of
// --keys. scripts/bench writes the limits file these match. Calls are spread over
// --channels HTTP/2 connections (Envoy opens one per worker thread).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

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
};

struct window {
  steady::time_point from;   // record completions of calls started from here...
  steady::time_point until;  // ...and completed before here
};

// What the streams saw inside the measured window, and every call completed (warm-up
// included). Callbacks run on gRPC's threads: a stream's own tally is touched by one
// callback at a time (its calls are sequential); the tallies are merged at the end.
struct tally {
  std::vector<std::uint32_t> latency_ns;
  std::uint64_t ok = 0;
  std::uint64_t over_limit = 0;
  std::uint64_t errors = 0;
  std::uint64_t completed = 0;
  std::string first_error;

  void merge(tally&& o) {
    latency_ns.insert(latency_ns.end(), o.latency_ns.begin(), o.latency_ns.end());
    ok += o.ok;
    over_limit += o.over_limit;
    errors += o.errors;
    completed += o.completed;
    if (first_error.empty()) first_error = std::move(o.first_error);
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

// One stream: a chain of calls, each with its own context (gRPC forbids reusing one).
class stream {
 public:
  stream(rls::RateLimitService::Stub& stub, const options& o, std::uint64_t seed, window w,
         std::function<void()> on_end)
      : stub_(stub), o_(o), src_(seed), w_(w), on_end_(std::move(on_end)) {
    req_.set_domain(o.domain);
    for (int d = 0; d < o.descriptors; ++d) req_.add_descriptors()->add_entries();
    if (o.descriptors > 1) set_entry(req_, 2, "route", "/api/v1");
  }

  void next() {
    const auto i = src_.next() % o_.keys;
    set_entry(req_, 0, "client", "k:" + std::to_string(i));
    if (o_.descriptors > 1) set_entry(req_, 1, "tenant", "t:" + std::to_string(i % 100));
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    resp_.Clear();
    t0_ = steady::now();
    stub_.async()->ShouldRateLimit(ctx_.get(), &req_, &resp_,
                                   [this](const grpc::Status& s) { done(s); });
  }

  tally& result() { return t_; }

 private:
  void done(const grpc::Status& s) {
    const auto t1 = steady::now();
    ++t_.completed;
    if (t0_ >= w_.from && t1 <= w_.until) {
      t_.latency_ns.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0_).count(), UINT32_MAX)));
      if (!s.ok()) {
        ++t_.errors;
        if (t_.first_error.empty()) t_.first_error = s.error_message();
      } else if (resp_.overall_code() == rls::RateLimitResponse::OVER_LIMIT) {
        ++t_.over_limit;
      } else {
        ++t_.ok;
      }
    }
    if (t1 < w_.until) return next();
    on_end_();
  }

  rls::RateLimitService::Stub& stub_;
  const options& o_;
  index_source src_;
  window w_;
  std::function<void()> on_end_;
  rls::RateLimitRequest req_;
  rls::RateLimitResponse resp_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  steady::time_point t0_;
  tally t_;
};

// The streams go to `keep`, which outlives them: gRPC may still be returning from a
// stream's last callback when the run is over.
tally run(std::vector<std::unique_ptr<rls::RateLimitService::Stub>>& stubs, const options& o,
          int streams, window w, std::vector<std::unique_ptr<stream>>& keep) {
  std::mutex m;
  std::condition_variable cv;
  int live = streams;
  auto on_end = [&] {
    std::lock_guard lock(m);
    if (--live == 0) cv.notify_one();
  };
  std::vector<std::unique_ptr<stream>> all;
  for (int s = 0; s < streams; ++s) {
    all.push_back(std::make_unique<stream>(*stubs[static_cast<std::size_t>(s) % stubs.size()], o,
                                           static_cast<std::uint64_t>(s + 1), w, on_end));
  }
  for (auto& s : all) s->next();
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
    } else {
      throw std::invalid_argument("unknown argument " + std::string(a));
    }
  }
  if (o.target.empty()) throw std::invalid_argument("--target HOST:PORT is required");
  if (o.descriptors != 1 && o.descriptors != 3) throw std::invalid_argument("--descriptors 1|3");
  if (o.seconds <= 0 || o.warmup < 0) throw std::invalid_argument("bad --seconds or --warmup");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto o = parse(argc, argv);
    std::vector<std::unique_ptr<rls::RateLimitService::Stub>> stubs;
    for (int c = 0; c < o.channels; ++c) {
      grpc::ChannelArguments args;
      // Separate connections: without this, channels with equal arguments share one.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("sluice.bench.channel", c);
      auto ch = grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args);
      if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
        throw std::runtime_error("no gRPC connection to " + o.target);
      stubs.push_back(rls::RateLimitService::NewStub(ch));
    }
    std::vector<std::unique_ptr<stream>> ended;
    for (int streams : o.streams) {
      const auto start = steady::now();
      auto at = [&](double s) {
        return start +
               std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
      };
      auto t = run(stubs, o, streams, window{at(o.warmup), at(o.warmup + o.seconds)}, ended);
      const auto n = t.latency_ns.size();
      std::printf(
          "streams=%d descriptors=%d keys=%llu seconds=%.1f calls=%zu per_sec=%.0f p50_us=%.1f "
          "p99_us=%.1f p999_us=%.1f over_limit=%llu errors=%llu completed=%llu\n",
          streams, o.descriptors, static_cast<unsigned long long>(o.keys), o.seconds, n,
          static_cast<double>(n) / o.seconds, percentile_us(t.latency_ns, 0.50),
          percentile_us(t.latency_ns, 0.99), percentile_us(t.latency_ns, 0.999),
          static_cast<unsigned long long>(t.over_limit), static_cast<unsigned long long>(t.errors),
          static_cast<unsigned long long>(t.completed));
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
