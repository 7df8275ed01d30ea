#include "core/random_bytes.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>

#include <atomic>
#include <mutex>
#include <system_error>

namespace sluice::detail {
namespace {

// Why a generator of our own rather than RAND_bytes(), and not getrandom(2):
// - getrandom(2) costs ~45 ns per 16 bytes on our VMs (the kernel's ChaCha20 in plain C),
//   a fifth of a memory-backend acquire + release; this DRBG, ~6 ns, with AES-NI;
// - RAND_bytes() keeps one DRBG per thread, which OpenSSL's exit handler frees only for the
//   exiting thread: threads still alive at exit (Asio's system executor's) had theirs
//   reported by LeakSanitizer. One generator, behind a mutex taken once per 4 KiB drawn by
//   the callers, has no per-thread state, and is never freed (reachable from here).
struct generator {
  std::mutex mu;
  EVP_RAND_CTX* ctx = nullptr;
  std::uint64_t seeded_generation = 0;
};
constinit generator the_generator;
constinit std::atomic<std::uint64_t> forks{0};

// Around fork(): the child gets the mutex unlocked and a new generation, so its first draw
// reseeds (a copy of the parent's DRBG state would repeat the parent's bytes).
void before_fork() noexcept { the_generator.mu.lock(); }
void after_fork_in_parent() noexcept { the_generator.mu.unlock(); }
void after_fork_in_child() noexcept {
  forks.fetch_add(1, std::memory_order_relaxed);
  the_generator.mu.unlock();
}

[[noreturn]] void fail(const char* what) {
  throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), what);
}

EVP_RAND_CTX* make_ctx() {
  EVP_RAND* rand = EVP_RAND_fetch(nullptr, "CTR-DRBG", nullptr);
  if (rand == nullptr) fail("EVP_RAND_fetch(CTR-DRBG)");
  // No parent: seeded straight from the operating system's entropy source.
  EVP_RAND_CTX* ctx = EVP_RAND_CTX_new(rand, nullptr);
  EVP_RAND_free(rand);  // the context keeps its own reference
  if (ctx == nullptr) fail("EVP_RAND_CTX_new");
  char cipher[] = "AES-256-CTR";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_DRBG_PARAM_CIPHER, cipher, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_RAND_instantiate(ctx, 256, 0, nullptr, 0, params) != 1) {
    EVP_RAND_CTX_free(ctx);
    fail("EVP_RAND_instantiate");
  }
  return ctx;
}

}  // namespace

std::uint64_t fork_generation() noexcept {
  static const int registered =
      ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  (void)registered;
  return forks.load(std::memory_order_relaxed);
}

void fill_random_bytes(void* p, std::size_t n) {
  const auto generation = fork_generation();
  generator& g = the_generator;
  std::lock_guard lock(g.mu);
  if (g.ctx == nullptr) {
    g.ctx = make_ctx();
    g.seeded_generation = generation;
  }
  if (g.seeded_generation != generation) {
    if (EVP_RAND_reseed(g.ctx, 0, nullptr, 0, nullptr, 0) != 1) fail("EVP_RAND_reseed");
    g.seeded_generation = generation;
  }
  if (EVP_RAND_generate(g.ctx, static_cast<unsigned char*>(p), n, 256, 0, nullptr, 0) != 1) {
    fail("EVP_RAND_generate");
  }
}

}  // namespace sluice::detail
