// TLS to Redis (rediss://) against a real TLS-only redis-server (`--port 0 --tls-port P`)
// with certificates made by the openssl command at run time (support/test_pki.hpp):
// exact decisions over TLS, verification failures (wrong CA, host name mismatch, missing
// client certificate) that degrade per the failure mode without hanging, recovery after
// the server is killed and restarted, and TLS files that cannot be loaded.
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/redis_server.hpp"
#include "support/test_pki.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr auto command_timeout = 200ms;
constexpr auto connect_timeout = 500ms;
// A hang detector, not a speed test: a check that fails must still return about this fast.
constexpr auto hang_bound = connect_timeout + command_timeout + 2s;

// One set of certificates for the whole suite: making them costs a few openssl runs.
class TlsSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = std::make_unique<test_pki>(); }
  static void TearDownTestSuite() { pki_.reset(); }
  static const test_pki& pki() { return *pki_; }

  static redis_tls_files server_files(bool auth_clients = false) {
    redis_tls_files f;
    f.cert = pki().server_cert();
    f.key = pki().server_key();
    f.ca = pki().ca();
    f.auth_clients = auth_clients;
    f.client_cert = pki().client_cert();
    f.client_key = pki().client_key();
    return f;
  }

  static std::shared_ptr<backend> make_backend(const std::string& url) {
    redis_options o;
    o.url = url;
    o.command_timeout = command_timeout;
    o.connect_timeout = connect_timeout;
    o.reconnect_backoff_min = 10ms;
    o.reconnect_backoff_max = 200ms;
    return make_redis_backend(o.url, o);
  }

  static policy bucket(std::uint64_t capacity, failure_mode mode = failure_mode::closed) {
    policy p;
    p.capacity = capacity;
    p.refill_per_second = min_refill_per_second;  // nothing refills during a test
    p.on_failure = mode;
    return p;
  }

  // The first decision that is not degraded, polling while the connection comes up.
  static decision first_healthy(limiter& lim, const std::string& key, const policy& p,
                                std::chrono::milliseconds within = 10s) {
    const auto until = steady::now() + within;
    decision d;
    do {
      d = lim.check(key, p);
      if (!d.degraded) break;
      std::this_thread::sleep_for(10ms);
    } while (steady::now() < until);
    return d;
  }

  // `n` checks that must all be degraded (with a backend error) and return in time.
  static void expect_degraded(limiter& lim, const std::string& key, const policy& p, int n) {
    for (int i = 0; i < n; ++i) {
      const auto t0 = steady::now();
      const auto d = lim.check(key, p);
      EXPECT_LT(steady::now() - t0, hang_bound) << "check " << i << " hung";
      ASSERT_TRUE(d.degraded) << "check " << i << " was decided by Redis";
      EXPECT_TRUE(is_backend_error(d.backend_error)) << d.backend_error.message();
    }
  }

  static inline std::unique_ptr<test_pki> pki_;
};

using RedisTlsTest = TlsSuite;

TEST_F(RedisTlsTest, ConcurrentCallersOnOneKeyAdmitExactlyTheCapacity) {
  redis_server redis(server_files());
  // Verification on (the default): the CA signs a certificate with IP:127.0.0.1.
  limiter lim(make_backend(redis.url() + "?ca=" + pki().ca()));
  constexpr std::uint64_t capacity = 150;
  const auto p = bucket(capacity);
  const auto warm = first_healthy(lim, "warm", p);
  ASSERT_FALSE(warm.degraded) << warm.backend_error.message();

  constexpr int threads = 6;
  constexpr int per_thread = 50;  // 300 calls for 150 tokens
  std::atomic<int> allowed{0}, degraded{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        const auto d = lim.check("shared", p);
        if (d.degraded) ++degraded;
        if (d.allowed) ++allowed;
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(degraded.load(), 0);
  EXPECT_EQ(allowed.load(), static_cast<int>(capacity));
  const auto after = lim.check("shared", p);
  EXPECT_FALSE(after.degraded);
  EXPECT_FALSE(after.allowed);
  EXPECT_EQ(after.remaining, 0u);
}

TEST_F(RedisTlsTest, PasswordOverTls) {
  redis_server redis(server_files(), {"--requirepass", "tls-pw"});
  const std::string base = "rediss://:tls-pw@127.0.0.1:" + std::to_string(redis.port());
  limiter lim(make_backend(base + "/3?ca=" + pki().ca()));
  const auto d = first_healthy(lim, "k", bucket(2));
  ASSERT_FALSE(d.degraded) << d.backend_error.message();
  EXPECT_EQ(d.remaining, 1u);
  // A wrong password over a good TLS channel is refused by AUTH, not by TLS.
  limiter wrong(make_backend("rediss://:nope@127.0.0.1:" + std::to_string(redis.port()) +
                             "?ca=" + pki().ca()));
  expect_degraded(wrong, "k", bucket(2), 5);
}

class RedisTlsWrongCaTest : public TlsSuite, public ::testing::WithParamInterface<failure_mode> {};

TEST_P(RedisTlsWrongCaTest, HandshakeFailsAndChecksDegradePerMode) {
  redis_server redis(server_files());
  limiter lim(make_backend(redis.url() + "?ca=" + pki().other_ca()));
  constexpr std::uint64_t capacity = 3;
  const auto p = bucket(capacity, GetParam());
  int allowed = 0;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = steady::now();
    const auto d = lim.check("wrong-ca", p);
    EXPECT_LT(steady::now() - t0, hang_bound) << "check " << i << " hung";
    ASSERT_TRUE(d.degraded) << "check " << i << ": the server was trusted with the wrong CA";
    EXPECT_TRUE(is_backend_error(d.backend_error)) << d.backend_error.message();
    if (d.allowed) ++allowed;
    if (GetParam() == failure_mode::closed) {
      EXPECT_FALSE(d.allowed);
    }
  }
  switch (GetParam()) {
    case failure_mode::open:
      EXPECT_EQ(allowed, 20);
      break;
    case failure_mode::closed:
      EXPECT_EQ(allowed, 0);
      break;
    case failure_mode::local:  // the in-process bucket: the capacity, then denials
      EXPECT_EQ(allowed, static_cast<int>(capacity));
      break;
  }
  // Once the handshake has failed, the breaker answers at once instead of a timeout each.
  const auto t0 = steady::now();
  const auto d = lim.check("wrong-ca", p);
  EXPECT_EQ(d.backend_error, errc::backend_unavailable) << d.backend_error.message();
  EXPECT_LT(steady::now() - t0, 50ms);
}

INSTANTIATE_TEST_SUITE_P(Modes, RedisTlsWrongCaTest,
                         ::testing::Values(failure_mode::open, failure_mode::closed,
                                           failure_mode::local),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST_F(RedisTlsTest, HostNameMismatchFailsWhenVerifyIsOn) {
  // This certificate names only redis.test, while the URL says 127.0.0.1.
  auto files = server_files();
  files.cert = pki().named_server_cert();
  files.key = pki().named_server_key();
  redis_server redis(files);
  const std::string base = redis.url() + "?ca=" + pki().ca();

  limiter by_ip(make_backend(base));
  expect_degraded(by_ip, "k", bucket(5), 5);
  limiter other_name(make_backend(base + "&sni=other.test"));
  expect_degraded(other_name, "k", bucket(5), 5);

  // The name the certificate was issued for verifies; so does turning verification off.
  limiter by_name(make_backend(base + "&sni=redis.test"));
  const auto d = first_healthy(by_name, "k", bucket(5));
  EXPECT_FALSE(d.degraded) << d.backend_error.message();
  limiter unverified(make_backend(redis.url() + "?verify=no"));
  const auto u = first_healthy(unverified, "k", bucket(5));
  EXPECT_FALSE(u.degraded) << u.backend_error.message();
  EXPECT_EQ(u.remaining, 3u);  // the same bucket: one server
}

TEST_F(RedisTlsTest, ClientCertificateRequiredByTheServer) {
  redis_server redis(server_files(/*auth_clients=*/true));
  const std::string base = redis.url() + "?ca=" + pki().ca();

  limiter with_cert(
      make_backend(base + "&cert=" + pki().client_cert() + "&key=" + pki().client_key()));
  const auto d = first_healthy(with_cert, "k", bucket(5));
  EXPECT_FALSE(d.degraded) << d.backend_error.message();
  EXPECT_EQ(d.remaining, 4u);

  limiter without_cert(make_backend(base));
  expect_degraded(without_cert, "k", bucket(5), 5);
}

TEST_F(RedisTlsTest, ServerKilledAndRestartedRecovers) {
  redis_server redis(server_files());
  limiter lim(make_backend(redis.url() + "?ca=" + pki().ca()));
  const auto p = bucket(1000, failure_mode::open);
  const auto before = first_healthy(lim, "k", p);
  ASSERT_FALSE(before.degraded) << before.backend_error.message();
  EXPECT_EQ(before.remaining, 999u);

  redis.kill();
  expect_degraded(lim, "k", p, 20);

  redis.start();  // same port, empty data set, a new TLS session needed
  const auto after = first_healthy(lim, "k", p);
  ASSERT_FALSE(after.degraded) << "no recovery: " << after.backend_error.message();
  EXPECT_EQ(after.remaining, 999u);  // a fresh bucket on the restarted server
  const auto next = lim.check("k", p);
  EXPECT_FALSE(next.degraded);
  EXPECT_EQ(next.remaining, 998u);
}

// Bad TLS files are a start-up error that names the file, never a per-call one.
void expect_construction_fails(const std::string& url, const std::string& names) {
  try {
    redis_options o;
    o.url = url;
    make_redis_backend(o.url, o);
    ADD_FAILURE() << "constructed a backend for " << url;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST_F(RedisTlsTest, UnloadableFilesThrowAtConstructionNamingTheFile) {
  const std::string base = "rediss://127.0.0.1:1";
  const std::string missing = pki().dir() + "/missing.pem";
  const std::string not_pem = pki().dir() + "/not-pem.txt";
  std::ofstream(not_pem) << "not a certificate\n";

  expect_construction_fails(base + "?ca=" + missing, missing);
  expect_construction_fails(base + "?ca=" + not_pem, not_pem);
  expect_construction_fails(base + "?cert=" + missing + "&key=" + pki().client_key(), missing);
  expect_construction_fails(base + "?cert=" + not_pem + "&key=" + pki().client_key(), not_pem);
  expect_construction_fails(base + "?cert=" + pki().client_cert() + "&key=" + missing, missing);
  // A key that is not the certificate's.
  expect_construction_fails(base + "?cert=" + pki().client_cert() + "&key=" + pki().server_key(),
                            pki().server_key());
  // And the same files are fine.
  redis_options o;
  o.url =
      base + "?ca=" + pki().ca() + "&cert=" + pki().client_cert() + "&key=" + pki().client_key();
  EXPECT_NO_THROW(make_redis_backend(o.url, o));
}

}  // namespace
}  // namespace sluice::test
