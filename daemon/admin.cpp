#include "admin.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace sluice::daemon {
namespace {

bool is_b64token_char(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

// Closes a descriptor when it goes out of scope.
struct fd_closer {
  int fd;
  ~fd_closer() {
    if (fd >= 0) ::close(fd);
  }
};

bool ascii_iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

bool is_token68(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size() && is_b64token_char(s[i])) ++i;
  if (i == 0) return false;
  while (i < s.size() && s[i] == '=') ++i;
  return i == s.size();
}

std::optional<std::string> read_admin_token(const std::string& path, std::string& why) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below anyway).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    why = "cannot read " + quoted(path) + ": " + std::generic_category().message(errno);
    return std::nullopt;
  }
  const fd_closer closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = "cannot read " + quoted(path) + ": " + std::generic_category().message(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    why = quoted(path) + " is not a regular file";
    return std::nullopt;
  }
  // Read one byte past the limit: the size may have changed since fstat.
  std::string text;
  char buf[1024];
  while (text.size() <= max_admin_token_file_size) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = "cannot read " + quoted(path) + ": " + std::generic_category().message(errno);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  if (text.size() > max_admin_token_file_size) {
    why = quoted(path) + " is larger than " + std::to_string(max_admin_token_file_size) +
          " bytes; it must hold one token";
    return std::nullopt;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) {
    why = quoted(path) + " is empty; it must hold one token of at least " +
          std::to_string(min_admin_token_size) + " bytes";
    return std::nullopt;
  }
  // Neither message quotes the file: whatever it holds is, or is close to, a secret.
  if (!is_token68(text)) {
    why = "the token in " + quoted(path) +
          " must be one line of A-Z a-z 0-9 - . _ ~ + / (then = padding): it is sent as "
          "\"Authorization: Bearer <token>\"";
    return std::nullopt;
  }
  if (text.size() < min_admin_token_size) {
    why = "the token in " + quoted(path) + " is " + std::to_string(text.size()) +
          " bytes; at least " + std::to_string(min_admin_token_size) + " are required";
    return std::nullopt;
  }
  return text;
}

bearer_credentials parse_bearer(std::size_t count, std::string_view value) noexcept {
  using kind = bearer_credentials::kind;
  if (count == 0) return {kind::missing, {}};
  if (count > 1) return {kind::malformed, {}};
  auto is_ows = [](char c) { return c == ' ' || c == '\t'; };
  while (!value.empty() && is_ows(value.front())) value.remove_prefix(1);
  while (!value.empty() && is_ows(value.back())) value.remove_suffix(1);
  const auto space = value.find(' ');
  if (space == std::string_view::npos) return {kind::malformed, {}};
  if (!ascii_iequals(value.substr(0, space), "Bearer")) return {kind::malformed, {}};
  auto token = value.substr(space);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (!is_token68(token)) return {kind::malformed, {}};
  return {kind::token, token};
}

bool tokens_equal(std::string_view given, std::string_view expected) noexcept {
  const std::size_t n = expected.size();
  if (n == 0) return false;  // no token configured authenticates nobody
  // Every byte of `given` is compared with expected[j], j running over `expected` again and
  // again; the wrap is a mask, not a branch, so the loop's shape depends on given.size()
  // alone. The accumulator is volatile so that the compiler cannot stop at a difference.
  volatile unsigned char diff = 0;
  std::size_t j = 0;
  for (std::size_t i = 0; i < given.size(); ++i) {
    diff = static_cast<unsigned char>(
        diff | (static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(expected[j])));
    const std::size_t next = j + 1;
    j = next & (std::size_t{0} - static_cast<std::size_t>(next != n));
  }
  const std::size_t lengths = given.size() ^ n;
  return (static_cast<std::size_t>(diff) | lengths) == 0;
}

std::optional<key_operation> admin_operation(std::string_view endpoint) noexcept {
  if (endpoint == "reset") return key_operation::reset;
  if (endpoint == "refund") return key_operation::refund;
  if (endpoint == "penalize") return key_operation::penalize;
  if (endpoint == "block") return key_operation::block;
  return std::nullopt;
}

}  // namespace sluice::daemon
