// POST /v1/check's body: what is read from it, and which problem each invalid body gets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "check_request.hpp"

namespace sluice::daemon {
namespace {

struct invalid_case {
  std::string body;
  std::string code;
  std::string detail;
};

TEST(DaemonCheckRequest, ReadsKeyPolicyAndCost) {
  check_request r;
  ASSERT_FALSE(parse_check_request(R"({"policy":"api","key":"k\u00e9 1","cost":3})", r));
  EXPECT_EQ(r.key, "k\xc3\xa9 1");
  EXPECT_EQ(r.policy, "api");
  EXPECT_EQ(r.cost, 3u);

  ASSERT_FALSE(parse_check_request(" {\"key\":\"a\",\"policy\":\"p\"}\n", r));
  EXPECT_EQ(r.key, "a");
  EXPECT_EQ(r.cost, 1u) << "cost defaults to 1";

  ASSERT_FALSE(parse_check_request(R"({"key":"a","policy":"p","cost":18446744073709551615})", r));
  EXPECT_EQ(r.cost, 18446744073709551615u);

  for (const char* cost : {"-1", "-0", "0", "-9223372036854775808"}) {
    ASSERT_FALSE(
        parse_check_request(std::string(R"({"key":"a","policy":"p","cost":)") + cost + "}", r))
        << cost;
    EXPECT_EQ(r.cost, 0u) << cost << ": a cost below 1 reads as 0, which no policy accepts";
  }
}

TEST(DaemonCheckRequest, ReusedRequestStartsEmpty) {
  check_request r;
  ASSERT_FALSE(parse_check_request(R"({"key":"a","policy":"p","cost":5})", r));
  ASSERT_FALSE(parse_check_request(R"({"key":"b","policy":"q"})", r));
  EXPECT_EQ(r.cost, 1u);
  EXPECT_EQ(r.key, "b");
}

TEST(DaemonCheckRequest, InvalidBodiesGetTheirProblem) {
  const std::vector<invalid_case> cases{
      {R"({"key":"a",)", "malformed_json", "the body is not valid JSON"},
      {R"({"key":"a","policy":"p"} x)", "malformed_json", "the body is not valid JSON"},
      {"", "malformed_json", "the body is not valid JSON"},
      {"{\"key\":\"\xff\",\"policy\":\"p\"}", "malformed_json", "the body is not valid JSON"},
      {R"({"a":1,"a":2)", "malformed_json", "the body is not valid JSON"},
      {R"({"key":"a","policy":"p"} // note)", "malformed_json", "the body is not valid JSON"},
      {R"({"key":"a","key":"b","policy":"p"})", "invalid_request",
       R"(member "key" appears more than once)"},
      {R"({"key":"a","policy":"p","cost":{"x":1,"x":2}})", "invalid_request",
       R"(member "x" appears more than once)"},
      {R"([{"a":1,"a":2}])", "invalid_request", R"(member "a" appears more than once)"},
      {R"({"zz":1,"zz":2})", "invalid_request", R"(member "zz" appears more than once)"},
      {R"({"key":"a","policy":"p","cost":[[{"b":1,"b":2}]]})", "invalid_request",
       R"(member "b" appears more than once)"},
      {R"({"key":"a","key":"b","policy":"p"})", "invalid_request",
       R"(member "key" appears more than once)"},
      {R"(["a"])", "invalid_request", "the body must be a JSON object"},
      {R"("a")", "invalid_request", "the body must be a JSON object"},
      {"7", "invalid_request", "the body must be a JSON object"},
      {R"({"zeta":1,"beta":2,"key":"a","policy":"p"})", "invalid_request",
       R"(unknown member "beta" (want key, policy, cost))"},
      {R"({"zeta":1})", "invalid_request", R"(unknown member "zeta" (want key, policy, cost))"},
      {R"({"policy":"p"})", "invalid_request", R"("key" is required)"},
      {R"({"key":1})", "invalid_request", R"("key" must be a string)"},
      {R"({"key":7,"policy":"p"})", "invalid_request", R"("key" must be a string)"},
      {R"({"key":null,"policy":"p"})", "invalid_request", R"("key" must be a string)"},
      {R"({"key":{"a":"b"},"policy":"p"})", "invalid_request", R"("key" must be a string)"},
      {R"({"key":"a"})", "invalid_request", R"("policy" is required)"},
      {R"({"key":"a","policy":["p"]})", "invalid_request", R"("policy" must be a string)"},
      {R"({"key":"a","policy":"p","cost":1.5})", "invalid_request", R"("cost" must be an integer)"},
      {R"({"key":"a","policy":"p","cost":1e2})", "invalid_request", R"("cost" must be an integer)"},
      {R"({"key":"a","policy":"p","cost":"2"})", "invalid_request", R"("cost" must be an integer)"},
      {R"({"key":"a","policy":"p","cost":18446744073709551616})", "invalid_request",
       R"("cost" must be an integer)"},
      // Two objects that each name "a" once repeat nothing.
      {R"({"key":"a","policy":"p","cost":[{"a":1},{"a":1}]})", "invalid_request",
       R"("cost" must be an integer)"},
  };
  for (const auto& c : cases) {
    check_request r;
    const auto err = parse_check_request(c.body, r);
    ASSERT_TRUE(err.has_value()) << c.body;
    EXPECT_EQ(err->code, c.code) << c.body;
    EXPECT_EQ(err->detail, c.detail) << c.body;
  }
}

}  // namespace
}  // namespace sluice::daemon
