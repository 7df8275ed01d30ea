// normalize_path's output is its own normal form (found by tests/fuzz/normalize_path_fuzz).
#include <gtest/gtest.h>

#include <sluice/http/request.hpp>
#include <sluice/http/rules.hpp>

namespace sluice::http {
namespace {

TEST(HttpNormalizePathTest, BarePercentIsEscaped) {
  EXPECT_EQ(normalize_path("%"), "/%25");
  EXPECT_EQ(normalize_path("/100%"), "/100%25");
  EXPECT_EQ(normalize_path("/%zz/%4"), "/%25zz/%254");
  EXPECT_EQ(normalize_path("/%25"), "/%25");  // an escaped '%' stays escaped
}

// A bare '%' followed by escaped hex digits used to become an escape on a second pass:
// `/%%36%31dmin` gave `/%61dmin`, whose normal form is `/admin`.
TEST(HttpNormalizePathTest, IsIdempotent) {
  for (const char* target : {"/%%36%31dmin", "/%%32E%%32E/x", "%", "/a%%41", "/%2%46"}) {
    const auto once = normalize_path(target);
    EXPECT_EQ(normalize_path(once), once) << target;
  }
  EXPECT_EQ(normalize_path("/%%36%31dmin"), "/%2561dmin");
}

// One path to a server (it reads a bare '%' as a '%') is one path to the rules.
TEST(HttpNormalizePathTest, SpellingsOfALiteralPercentMatchTheSameRule) {
  EXPECT_EQ(normalize_path("/%%36%31dmin"), normalize_path("/%2561dmin"));
  rule_match m;
  m.path_prefix = "/%2561";
  request_facts req;
  req.path = "/%%36%31dmin";
  EXPECT_TRUE(m.matches(req));
}

}  // namespace
}  // namespace sluice::http
