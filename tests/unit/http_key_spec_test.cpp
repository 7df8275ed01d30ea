// Key specs: parsing, composites, fallback chains and collision-free keys.
#include <gtest/gtest.h>

#include <sluice/http/key_spec.hpp>
#include <sluice/policy.hpp>

namespace sluice::http {
namespace {

key_spec spec(std::string_view text) {
  std::string why;
  auto s = key_spec::parse(text, &why);
  EXPECT_TRUE(s) << why;
  return s ? *s : key_spec{};
}

std::string parse_error(std::string_view text) {
  std::string why;
  EXPECT_FALSE(key_spec::parse(text, &why)) << text;
  return why;
}

struct request {
  header_map headers;
  request_facts facts;
  explicit request(header_map h = {}, std::string peer = "198.51.100.7")
      : headers(std::move(h)),
        facts{std::move(peer), "POST", "/api/v1/items?x=1", "API.Example.com:8443", {}} {
    facts.headers = headers.lookup();
  }
  std::optional<std::string> key(std::string_view text, const key_options& o = {}) const {
    return spec(text).derive(facts, o);
  }
};

TEST(HttpKeySpecTest, ParsesPartsAndCanonicalSpelling) {
  EXPECT_EQ(spec("ip").to_string(), "ip");
  EXPECT_EQ(spec(" IP + Path ").to_string(), "ip+path");
  EXPECT_EQ(spec("header:X-API-Key+path").to_string(), "header:X-API-Key+path");
  EXPECT_EQ(spec("header:X-User-Id | header:X-API-Key | ip").to_string(),
            "header:X-User-Id|header:X-API-Key|ip");
  EXPECT_EQ(spec("method+host+path+ip").to_string(), "method+host+path+ip");
  const auto s = spec("header:A+ip|path");
  ASSERT_EQ(s.alternatives().size(), 2u);
  EXPECT_EQ(s.alternatives()[0].size(), 2u);
  EXPECT_EQ(s.alternatives()[0][0].what, key_part::kind::header);
  EXPECT_EQ(s.alternatives()[0][0].header_name, "A");
  EXPECT_EQ(spec(spec("header:A+ip|path").to_string()), s);
  EXPECT_EQ(key_spec{}.to_string(), "ip");
}

TEST(HttpKeySpecTest, ParseErrorsAreClearText) {
  EXPECT_EQ(parse_error(""),
            "key \"\": empty (want e.g. ip, header:X-API-Key, ip+path, header:X-User-Id|ip)");
  EXPECT_EQ(parse_error("ipp"),
            "key \"ipp\": unknown part \"ipp\" (want ip, method, host, path or header:NAME)");
  EXPECT_EQ(parse_error("header:"), "key \"header:\": header name is empty in \"header:\"");
  EXPECT_EQ(parse_error("header:X API"),
            "key \"header:X API\": \"X API\" is not a valid header name");
  EXPECT_EQ(parse_error("ip||path"), "key \"ip||path\": empty alternative around '|'");
  EXPECT_EQ(parse_error("ip|"), "key \"ip|\": empty alternative around '|'");
  EXPECT_EQ(parse_error("ip++path"), "key \"ip++path\": empty part around '+'");
  EXPECT_EQ(parse_error("ip+ip"), "key \"ip+ip\": part \"ip\" repeated");
  EXPECT_EQ(parse_error("header:a+header:A"),
            "key \"header:a+header:A\": part \"header:A\" repeated");
  EXPECT_FALSE(key_spec::parse("nonsense"));  // `why` is optional
}

TEST(HttpKeySpecTest, DerivesTaggedKeys) {
  const request r({{"X-API-Key", "k-123"}});
  EXPECT_EQ(r.key("ip"), "ip=198.51.100.7");
  EXPECT_EQ(r.key("path"), "path=/api/v1/items");  // no query
  EXPECT_EQ(r.key("method"), "m=POST");
  EXPECT_EQ(r.key("host"), "host=api.example.com");  // the port is not part of the site
  EXPECT_EQ(r.key("header:x-api-key"), "h:x-api-key=k-123");
  EXPECT_EQ(r.key("ip+path"), "ip=198.51.100.7|path=/api/v1/items");
  EXPECT_EQ(r.key("header:X-API-Key+path"), "h:x-api-key=k-123|path=/api/v1/items");
  const request v6({}, "2001:db8:1:2::99");
  EXPECT_EQ(v6.key("ip"), "ip=2001:db8:1:2::/64");
}

TEST(HttpKeySpecTest, FallbackChainPicksTheStrongestIdentityAtHand) {
  const auto chain = "header:X-User-Id|header:X-API-Key|ip";
  EXPECT_EQ(request({{"X-User-Id", "42"}, {"X-API-Key", "k"}}).key(chain), "h:x-user-id=42");
  EXPECT_EQ(request({{"X-API-Key", "k"}}).key(chain), "h:x-api-key=k");
  EXPECT_EQ(request({{"X-User-Id", " "}, {"X-API-Key", "k"}}).key(chain), "h:x-api-key=k");
  EXPECT_EQ(request().key(chain), "ip=198.51.100.7");
}

TEST(HttpKeySpecTest, MissingIdentityGivesNoKeyNeverAnEmptyOne) {
  EXPECT_EQ(request().key("header:X-API-Key"), std::nullopt);
  EXPECT_EQ(request({{"X-API-Key", ""}}).key("header:X-API-Key"), std::nullopt);
  EXPECT_EQ(request().key("header:X-API-Key+path"), std::nullopt);
  EXPECT_EQ(request({}, "").key("ip"), std::nullopt);
  request no_lookup;
  no_lookup.facts.headers = nullptr;
  EXPECT_EQ(no_lookup.key("header:X-API-Key"), std::nullopt);
  EXPECT_EQ(no_lookup.key("header:X-API-Key|ip"), "ip=198.51.100.7");
}

TEST(HttpKeySpecTest, ValuesCannotImitateOtherParts) {
  // A header value that spells another part's tag is escaped, so it never equals it.
  const auto forged = request({{"X-API-Key", "k|path=/api/v1/items"}}).key("header:X-API-Key+path");
  ASSERT_TRUE(forged);
  EXPECT_EQ(*forged, "h:x-api-key=k%7Cpath=/api/v1/items|path=/api/v1/items");
  EXPECT_EQ(request({{"X-API-Key", "a%b#c\x01"}}).key("header:X-API-Key"),
            "h:x-api-key=a%25b%23c%01");
  // Different alternatives are tagged differently.
  EXPECT_NE(request({{"X-User-Id", "198.51.100.7"}}).key("header:X-User-Id|ip"),
            request().key("header:X-User-Id|ip"));
}

TEST(HttpKeySpecTest, LongValuesAreHashed) {
  const std::string long_a(5000, 'a');
  std::string long_b = long_a;
  long_b.back() = 'b';
  const auto ka = request({{"X-API-Key", long_a}}).key("header:X-API-Key");
  const auto kb = request({{"X-API-Key", long_b}}).key("header:X-API-Key");
  ASSERT_TRUE(ka && kb);
  EXPECT_EQ(ka->size(), std::string("h:x-api-key=#").size() + 32);
  EXPECT_NE(*ka, *kb);
  EXPECT_EQ(ka, request({{"X-API-Key", long_a}}).key("header:X-API-Key"));  // stable
  EXPECT_LE(ka->size(), max_key_size);
}

}  // namespace
}  // namespace sluice::http
