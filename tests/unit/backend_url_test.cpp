// A backend URL's scheme is read in one place; every spelling the docs list, and no other.
#include <gtest/gtest.h>

#include <sluice/backend_url.hpp>

namespace sluice {
namespace {

TEST(BackendUrlTest, EveryDocumentedSchemeIsKnown) {
  using k = backend_kind;
  EXPECT_EQ(parse_backend_scheme("memory"), (backend_scheme{k::memory, false}));
  EXPECT_EQ(parse_backend_scheme("redis://h:1"), (backend_scheme{k::redis, false}));
  EXPECT_EQ(parse_backend_scheme("rediss://h"), (backend_scheme{k::redis, true}));
  EXPECT_EQ(parse_backend_scheme("redis+cluster://a,b"), (backend_scheme{k::redis_cluster, false}));
  EXPECT_EQ(parse_backend_scheme("rediss+cluster://a"), (backend_scheme{k::redis_cluster, true}));
  EXPECT_EQ(parse_backend_scheme("redis+sentinel://s/m"),
            (backend_scheme{k::redis_sentinel, false}));
  EXPECT_EQ(parse_backend_scheme("rediss+sentinel://s/m"),
            (backend_scheme{k::redis_sentinel, true}));
}

TEST(BackendUrlTest, AnythingElseIsNot) {
  for (const char* url : {"", "Memory", "memory://", "REDIS://h", "redis:/h", "redis", "http://h",
                          "redis+cluster:/a", "redis+other://a", "unix:///tmp/redis.sock"}) {
    EXPECT_FALSE(parse_backend_scheme(url).has_value()) << url;
  }
}

}  // namespace
}  // namespace sluice
