#include "redis/reply_action.hpp"

#include <array>
#include <string_view>

namespace sluice::redis {
namespace {

using kind = reply_action::kind;

struct error_code_action {
  std::string_view prefix;
  kind what;
};

// MOVED and ASK are not here: parse_redirect reads them, and a malformed one is `failed`.
constexpr std::array<error_code_action, 6> error_code_actions{{
    {"NOSCRIPT", kind::resend_as_eval},
    // A cluster reconfiguring or a node starting up: retrying later (after a map refresh)
    // may succeed.
    {"CLUSTERDOWN", kind::retry_later},
    {"TRYAGAIN", kind::retry_later},
    {"LOADING", kind::retry_later},
    {"MASTERDOWN", kind::retry_later},
    // Writes to a replica: whoever said where the master is (Sentinel, the slot map) is
    // out of date.
    {"READONLY", kind::rediscover_master},
}};

}  // namespace

reply_action classify_reply(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ERROR) return {};
  const std::string_view text = reply_text(reply);
  if (auto r = cluster::parse_redirect(text)) {
    const kind what = r->type == cluster::redirect::kind::moved ? kind::moved : kind::ask;
    return {what, std::move(*r)};
  }
  for (const auto& a : error_code_actions) {
    if (text.starts_with(a.prefix)) return {a.what, {}};
  }
  return {kind::failed, {}};
}

}  // namespace sluice::redis
