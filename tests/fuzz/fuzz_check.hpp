#pragma once
// What every fuzz target shares: the entry point's declaration, an invariant check that
// says which invariant failed before it aborts (libFuzzer then saves the input), and small
// byte-level helpers. No libFuzzer header: the same sources build with g++ and the replay
// main (replay_main.cpp) in the ordinary presets.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace sluice::fuzz {

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: invariant violated: %s\n", file, line, what);
  std::abort();
}

// Not assert(): it must hold in Release replays too, where NDEBUG is set.
#define SLUICE_FUZZ_CHECK(cond) ((cond) ? void() : ::sluice::fuzz::fail(#cond, __FILE__, __LINE__))

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) noexcept {
  return {reinterpret_cast<const char*>(data), size};
}

// Length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlongs, surrogates or code
// points past U+10FFFF), 0 when there is none. Written here, not taken from the code under
// test, so that a bug there cannot hide itself.
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

inline bool is_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Splits the input into lines ('\n'); `next` yields them in order, then nothing.
class lines {
 public:
  explicit lines(std::string_view text) noexcept : rest_(text), more_(true) {}

  bool next(std::string_view& line) noexcept {
    if (!more_) return false;
    const auto nl = rest_.find('\n');
    line = rest_.substr(0, nl);
    if (nl == std::string_view::npos) {
      more_ = false;
      rest_ = {};
    } else {
      rest_.remove_prefix(nl + 1);
    }
    return true;
  }
  std::string_view rest() const noexcept { return rest_; }

 private:
  std::string_view rest_;
  bool more_;
};

}  // namespace sluice::fuzz
