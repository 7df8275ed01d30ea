// The one connection handshake (src/redis/handshake.hpp), read back as the server would read
// it: which commands, with which arguments, and as many replies as it counts.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "redis/handshake.hpp"
#include "redis/resp.hpp"
#include "redis/scripts.hpp"

namespace {

using sluice::redis::handshake_role;
using sluice::redis::make_handshake;

// Each command of `h` as its arguments; also checks that h.replies counts them.
std::vector<std::vector<std::string>> commands_of(const sluice::redis::handshake& h) {
  sluice::redis::reply_reader r;
  EXPECT_TRUE(r.feed(h.commands.data(), h.commands.size()));
  std::vector<std::vector<std::string>> out;
  for (;;) {
    sluice::redis::reply_ptr c;
    const auto st = r.next(c);
    if (st != sluice::redis::reply_reader::status::reply) {
      EXPECT_EQ(st, sluice::redis::reply_reader::status::incomplete);
      break;
    }
    std::vector<std::string> args;
    for (std::size_t i = 0; i < c->elements; ++i) {
      args.emplace_back(sluice::redis::reply_text(*c->element[i]));
    }
    out.push_back(std::move(args));
  }
  EXPECT_EQ(out.size(), h.replies);
  return out;
}

std::vector<std::string> script_load(std::string_view source) {
  return {"SCRIPT", "LOAD", std::string(source)};
}

TEST(RedisHandshakeTest, ADataNodeWithoutCredentialsLoadsEveryScript) {
  const auto got = commands_of(make_handshake({}));
  ASSERT_EQ(got.size(), sluice::detail::lua_scripts.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], script_load(sluice::detail::lua_scripts[i]->source)) << i;
  }
}

TEST(RedisHandshakeTest, EveryScriptTheLibraryCallsIsLoaded) {
  const auto got = commands_of(make_handshake({}));
  for (const auto* s : {&sluice::detail::lua_decide, &sluice::detail::lua_decide_multi,
                        &sluice::detail::lua_decide_batch, &sluice::detail::lua_refund}) {
    EXPECT_NE(std::find(got.begin(), got.end(), script_load(s->source)), got.end());
  }
}

TEST(RedisHandshakeTest, AuthThenSelectThenScripts) {
  const auto got = commands_of(make_handshake({.user = "alice", .password = "secret", .db = 3}));
  ASSERT_EQ(got.size(), 2 + sluice::detail::lua_scripts.size());
  EXPECT_EQ(got[0], (std::vector<std::string>{"AUTH", "alice", "secret"}));
  EXPECT_EQ(got[1], (std::vector<std::string>{"SELECT", "3"}));
  EXPECT_EQ(got[2], script_load(sluice::detail::lua_decide.source));
}

TEST(RedisHandshakeTest, APasswordAloneAuthenticatesTheDefaultUser) {
  const auto got = commands_of(make_handshake({.user = "", .password = "secret"}));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0], (std::vector<std::string>{"AUTH", "secret"}));
}

TEST(RedisHandshakeTest, NoUserWithoutAPassword) {
  // A user name with no password is no AUTH (the URL parser refuses it before this).
  const auto got = commands_of(make_handshake({.user = "alice", .password = ""}));
  EXPECT_EQ(got.size(), sluice::detail::lua_scripts.size());
}

TEST(RedisHandshakeTest, ASentinelGetsAuthOnly) {
  EXPECT_TRUE(
      commands_of(
          make_handshake({.role = handshake_role::sentinel, .user = "", .password = "", .db = 2}))
          .empty());
  const auto got = commands_of(make_handshake(
      {.role = handshake_role::sentinel, .user = "watcher", .password = "pw", .db = 2}));
  EXPECT_EQ(got, (std::vector<std::vector<std::string>>{{"AUTH", "watcher", "pw"}}));
}

}  // namespace
