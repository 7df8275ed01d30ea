// The Redis URL parsers (redis://, redis+cluster://, redis+sentinel:// and their rediss
// forms) and redacted_url, which writes a URL into logs. They must never throw, and no
// password a parser finds may reach a log line.
//
// Input: the URL; a leading byte 0-2 picks the scheme prefix to put before the rest
// (so that mutations explore past the scheme), any other byte is part of the URL.
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>
#include <sluice/redis_sentinel.hpp>

#include <string>

#include "config.hpp"
#include "fuzz_check.hpp"

namespace {

// The text of the URL between "://" and the end of the user info as every parser reads it:
// the query (from the first '?') and the path (from the next '/') are cut first, then the
// last '@' ends the user info. Empty when there is none.
std::string_view userinfo_of(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return {};
  auto rest = url.substr(scheme + 3);
  rest = rest.substr(0, rest.find('?'));
  rest = rest.substr(0, rest.find('/'));
  const auto at = rest.rfind('@');
  return at == std::string_view::npos ? std::string_view{} : rest.substr(0, at);
}

// The password's text as written in the URL (still percent-encoded).
std::string_view written_password(std::string_view url) {
  const auto info = userinfo_of(url);
  const auto colon = info.find(':');
  return colon == std::string_view::npos ? std::string_view{} : info.substr(colon + 1);
}

void check_redacted(std::string_view url, const std::string& password) {
  const auto red = sluice::daemon::redacted_url(url);
  const auto written = written_password(url);
  if (password.empty() || written.empty()) return;
  // The user info is the user and "***": nothing of the password is left, wherever in
  // the URL it would have been.
  const auto info = userinfo_of(red);
  const auto colon = info.find(':');
  SLUICE_FUZZ_CHECK(colon != std::string_view::npos && info.substr(colon + 1) == "***");
  SLUICE_FUZZ_CHECK(info.substr(0, colon) == userinfo_of(url).substr(0, colon));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string url;
  auto text = sluice::fuzz::as_text(data, size);
  static constexpr const char* schemes[] = {"redis://", "redis+cluster://", "redis+sentinel://"};
  if (!text.empty() && static_cast<unsigned char>(text.front()) < 3) {
    url = schemes[static_cast<unsigned char>(text.front())];
    text.remove_prefix(1);
  }
  url += text;

  std::string why;
  if (const auto u = sluice::parse_redis_url(url, &why)) {
    SLUICE_FUZZ_CHECK(!u->host.empty());
    SLUICE_FUZZ_CHECK(u->user.empty() || !u->password.empty());
    SLUICE_FUZZ_CHECK(u->db >= 0);
    check_redacted(url, u->password);
  } else {
    SLUICE_FUZZ_CHECK(!why.empty());
  }
  why.clear();
  if (const auto u = sluice::parse_redis_cluster_url(url, &why)) {
    SLUICE_FUZZ_CHECK(!u->seeds.empty());
    for (const auto& s : u->seeds) SLUICE_FUZZ_CHECK(!s.host.empty() && s.port != 0);
    check_redacted(url, u->password);
  } else {
    SLUICE_FUZZ_CHECK(!why.empty());
  }
  why.clear();
  if (const auto u = sluice::parse_redis_sentinel_url(url, &why)) {
    SLUICE_FUZZ_CHECK(!u->sentinels.empty() && !u->master_name.empty() && u->db >= 0);
    for (const auto& s : u->sentinels) SLUICE_FUZZ_CHECK(!s.host.empty() && s.port != 0);
    check_redacted(url, u->password);
    // The sentinels' own password, a query option, is redacted too.
    if (!u->sentinel_password.empty()) {
      const auto red = sluice::daemon::redacted_url(url);
      const auto q = red.find('?');
      SLUICE_FUZZ_CHECK(q != std::string::npos);
      SLUICE_FUZZ_CHECK(red.find("sentinel_password=***", q) != std::string::npos);
      const auto query = std::string_view(red).substr(q + 1);
      for (std::size_t i = 0; i <= query.size();) {
        const auto amp = std::min(query.find('&', i), query.size());
        const auto pair = query.substr(i, amp - i);
        if (pair.starts_with("sentinel_password="))
          SLUICE_FUZZ_CHECK(pair == "sentinel_password=***");
        i = amp + 1;
      }
    }
  } else {
    SLUICE_FUZZ_CHECK(!why.empty());
  }
  // Whatever the text, neither redacting nor validating it throws.
  (void)sluice::daemon::redacted_url(url);
  (void)sluice::validate_redis_url(url, &why);
  return 0;
}
