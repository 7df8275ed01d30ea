// Replies no server of ours would send are refused before they cost memory or reach a
// decision (found by tests/fuzz/redis_reply_fuzz): an array header allocated whatever it
// announced, and a wait of 2^63-1 ms overflowed its conversion to seconds.
#include <sluice/error.hpp>
#include <sluice/http/headers.hpp>

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "redis/resp.hpp"
#include "redis/decide_command.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

redis::reply_ptr parse_one(std::string_view bytes) {
  redis::reply_reader r;
  EXPECT_TRUE(r.feed(bytes.data(), bytes.size()));
  redis::reply_ptr out;
  EXPECT_EQ(r.next(out), redis::reply_reader::status::reply);
  return out;
}

TEST(RedisReplyBoundsTest, ArrayHeadersAnnouncingTooManyElementsAreProtocolErrors) {
  redis::reply_reader r;
  const std::string_view huge = "*444444440\r\n:1\r\n";
  ASSERT_TRUE(r.feed(huge.data(), huge.size()));
  redis::reply_ptr out;
  EXPECT_EQ(r.next(out), redis::reply_reader::status::protocol_error);
  EXPECT_NE(r.error_text().find("more elements"), std::string_view::npos) << r.error_text();

  // The longest allowed array is read as usual, and so is one nested in another.
  redis::reply_reader ok;
  std::string most = "*1\r\n*" + std::to_string(redis::reply_reader::max_array_elements) + "\r\n";
  for (int i = 0; i < redis::reply_reader::max_array_elements; ++i) most += ":7\r\n";
  ASSERT_TRUE(ok.feed(most.data(), most.size()));
  ASSERT_EQ(ok.next(out), redis::reply_reader::status::reply);
  ASSERT_EQ(out->elements, 1u);
  EXPECT_EQ(out->element[0]->elements, std::size_t(redis::reply_reader::max_array_elements));

  redis::reply_reader one_more;
  const auto header = "*" + std::to_string(redis::reply_reader::max_array_elements + 1) + "\r\n";
  ASSERT_TRUE(one_more.feed(header.data(), header.size()));
  EXPECT_EQ(one_more.next(out), redis::reply_reader::status::protocol_error);
}

TEST(RedisReplyBoundsTest, WaitsLongerThanAnyBucketCanTakeAreMalformed) {
  detail::limit_outcome o;
  // 1e9 tokens refilled at 0.001/s from a full burst below empty (a penalty): the longest
  // wait there is, 2e15 ms.
  EXPECT_EQ(redis::parse_decide_reply(
                *parse_one("*4\r\n:0\r\n:0\r\n:2000000000000000\r\n:2000000000000000\r\n"), o),
            redis::script_reply::decided);
  for (std::string_view bad : {"*4\r\n:0\r\n:0\r\n:2000000000000001\r\n:1\r\n",
                               "*4\r\n:1\r\n:0\r\n:0\r\n:2000000000000001\r\n",
                               "*4\r\n:0\r\n:0\r\n:9223372036854775807\r\n:1\r\n"}) {
    EXPECT_EQ(redis::parse_decide_reply(*parse_one(bad), o), redis::script_reply::malformed)
        << bad;
  }
  decision d;
  EXPECT_EQ(redis::to_decision(*parse_one("*4\r\n:0\r\n:0\r\n:9223372036854775807\r\n:"
                                          "9223372036854775807\r\n"),
                               1, d),
            errc::backend_protocol_error);
  // The batch script's items are read the same way.
  std::vector<redis::batch_item> items;
  ASSERT_EQ(redis::parse_decide_batch_reply(
                *parse_one("*4\r\n:0\r\n:0\r\n:9223372036854775807\r\n:1\r\n"), 1, items),
            redis::script_reply::decided);
  EXPECT_EQ(items.at(0).ec, errc::backend_protocol_error);
}

TEST(RedisReplyBoundsTest, CeilSecondsDoesNotOverflow) {
  constexpr auto most = std::numeric_limits<std::chrono::milliseconds::rep>::max();
  EXPECT_EQ(http::ceil_seconds(std::chrono::milliseconds(most)),
            std::chrono::seconds(most / 1000 + 1));
  EXPECT_EQ(http::ceil_seconds(1001ms), 2s);
}

}  // namespace
