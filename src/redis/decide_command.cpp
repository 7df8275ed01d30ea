#include "redis/decide_command.hpp"

#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include <array>
#include <charconv>

#include "algorithm/token_bucket.hpp"
#include "redis/reply_action.hpp"
#include "redis/scripts.hpp"

namespace sluice::redis {
namespace {

// A decimal integer in a buffer that outlives the append_command call.
struct decimal {
  explicit decimal(std::int64_t v) noexcept {
    len = static_cast<std::size_t>(std::to_chars(buf.data(), buf.data() + buf.size(), v).ptr -
                                   buf.data());
  }
  std::string_view view() const noexcept { return {buf.data(), len}; }
  std::array<char, 24> buf{};
  std::size_t len = 0;
};

using detail::longest_wait_ms;

// {allowed 0|1, remaining whole units, retry_after_ms, reset_after_ms} at e[0..3].
script_reply parse_outcome(const redisReply* const* e, detail::limit_outcome& out) noexcept {
  for (std::size_t i = 0; i < 4; ++i) {
    if (!e[i] || e[i]->type != REDIS_REPLY_INTEGER || e[i]->integer < 0)
      return script_reply::malformed;
  }
  const long long allowed = e[0]->integer;
  // Bounds keep the wait's conversion to seconds in the response headers from overflowing
  // on a nonsense reply.
  if (allowed > 1 || e[1]->integer > static_cast<long long>(max_capacity) ||
      e[2]->integer > longest_wait_ms || e[3]->integer > longest_wait_ms)
    return script_reply::malformed;
  out = {};
  out.allowed = allowed == 1;
  out.remaining = e[1]->integer;
  out.retry_after_ms = e[2]->integer;
  out.reset_after_ms = e[3]->integer;
  if (out.allowed && out.retry_after_ms != 0) return script_reply::malformed;
  return script_reply::decided;
}

// How an error reply reads to the decoders; the caller re-sends on `noscript`.
script_reply error_reply(const redisReply& reply) {
  return classify_reply(reply).what == reply_action::kind::resend_as_eval ? script_reply::noscript
                                                                          : script_reply::failed;
}

}  // namespace

void append_decide_command(std::string& out, script_call call, std::string_view full_key,
                           const detail::limit_params& params, std::optional<std::int64_t> now_ms) {
  const decimal algo(detail::wire_code(params)), a(params.a), b(params.b), cost(params.cost),
      now(now_ms.value_or(0));
  const std::string_view script =
      call == script_call::evalsha ? detail::lua_decide.sha1 : detail::lua_decide.source;
  const std::array<std::string_view, 9> args{call == script_call::evalsha ? "EVALSHA" : "EVAL",
                                             script,
                                             "1",
                                             full_key,
                                             algo.view(),
                                             a.view(),
                                             b.view(),
                                             cost.view(),
                                             now.view()};
  append_command(out, args.data(), now_ms ? 9 : 8);
}

namespace {

void append_multi(std::string& out, script_call call, const detail::lua_script& script,
                  std::span<const multi_key> keys, std::optional<std::int64_t> now_ms) {
  std::vector<decimal> numbers;
  numbers.reserve(4 * keys.size() + 2);
  numbers.emplace_back(static_cast<std::int64_t>(keys.size()));
  for (const auto& k : keys) {
    numbers.emplace_back(detail::wire_code(k.params));
    numbers.emplace_back(k.params.a);
    numbers.emplace_back(k.params.b);
    numbers.emplace_back(k.params.cost);
  }
  if (now_ms) numbers.emplace_back(*now_ms);
  std::vector<std::string_view> args;
  args.reserve(3 + 5 * keys.size() + 1);
  args.push_back(call == script_call::evalsha ? "EVALSHA" : "EVAL");
  args.push_back(call == script_call::evalsha ? script.sha1 : script.source);
  args.push_back(numbers[0].view());
  for (const auto& k : keys) args.push_back(k.full_key);
  for (std::size_t i = 1; i < numbers.size(); ++i) args.push_back(numbers[i].view());
  append_command(out, args.data(), args.size());
}

}  // namespace

void append_decide_multi_command(std::string& out, script_call call,
                                 std::span<const multi_key> keys,
                                 std::optional<std::int64_t> now_ms) {
  append_multi(out, call, detail::lua_decide_multi, keys, now_ms);
}

void append_decide_batch_command(std::string& out, script_call call,
                                 std::span<const multi_key> keys,
                                 std::optional<std::int64_t> now_ms) {
  // Runs of consecutive items with the same parameters: count, algorithm, a, b, cost.
  std::vector<decimal> numbers;
  numbers.reserve(7);  // one run: a batch is mostly checks of one policy
  numbers.emplace_back(static_cast<std::int64_t>(keys.size()));
  if (now_ms) numbers.emplace_back(*now_ms);
  const std::size_t first_run = numbers.size();
  for (std::size_t i = 0; i < keys.size();) {
    const auto& p = keys[i].params;
    std::size_t j = i + 1;
    while (j < keys.size() && keys[j].params == p) ++j;
    numbers.emplace_back(static_cast<std::int64_t>(j - i));
    numbers.emplace_back(detail::wire_code(p));
    numbers.emplace_back(p.a);
    numbers.emplace_back(p.b);
    numbers.emplace_back(p.cost);
    i = j;
  }
  const auto& script = detail::lua_decide_batch;
  std::vector<std::string_view> args;
  args.reserve(4 + keys.size() + numbers.size());
  args.push_back(call == script_call::evalsha ? "EVALSHA" : "EVAL");
  args.push_back(call == script_call::evalsha ? script.sha1 : script.source);
  args.push_back(numbers[0].view());
  for (const auto& k : keys) args.push_back(k.full_key);
  args.push_back(now_ms ? numbers[1].view() : std::string_view{""});
  for (std::size_t i = first_run; i < numbers.size(); ++i) args.push_back(numbers[i].view());
  append_command(out, args.data(), args.size());
}

void append_refund_command(std::string& out, script_call call, std::span<const multi_key> keys) {
  append_multi(out, call, detail::lua_refund, keys, std::nullopt);
}

script_reply parse_decide_multi_reply(const redisReply& reply, std::size_t n,
                                      std::vector<detail::limit_outcome>& out) {
  out.clear();
  if (reply.type == REDIS_REPLY_ERROR) return error_reply(reply);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != n) return script_reply::malformed;
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const redisReply* e = reply.element[i];
    // An error inside the array is nonsense too: the script replies with errors whole.
    if (!e || e->type != REDIS_REPLY_ARRAY) return script_reply::malformed;
    if (parse_decide_reply(*e, out[i]) != script_reply::decided) return script_reply::malformed;
  }
  return script_reply::decided;
}

script_reply parse_decide_batch_reply(const redisReply& reply, std::size_t n,
                                      std::vector<batch_item>& out) {
  out.clear();
  if (reply.type == REDIS_REPLY_ERROR) return error_reply(reply);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4 * n) return script_reply::malformed;
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* item = reply.element + 4 * i;
    script_reply r = script_reply::malformed;
    if (item[0] && item[0]->type == REDIS_REPLY_ERROR) {
      // NOSCRIPT is not something an item can say: nonsense.
      r = error_reply(*item[0]) == script_reply::noscript ? script_reply::malformed
                                                          : script_reply::failed;
    } else {
      r = parse_outcome(item, out[i].outcome);
    }
    out[i].ec = to_error(r);
  }
  return script_reply::decided;
}

std::error_code to_decisions(const redisReply& reply, std::span<const std::uint64_t> limits,
                             std::vector<decision>& out) {
  std::vector<detail::limit_outcome> os;
  if (const auto ec = to_error(parse_decide_multi_reply(reply, limits.size(), os))) return ec;
  out.clear();
  out.reserve(os.size());
  for (std::size_t i = 0; i < os.size(); ++i) {
    out.push_back(detail::to_decision(os[i], limits[i]));
  }
  return {};
}

script_reply parse_decide_reply(const redisReply& reply, detail::limit_outcome& out) noexcept {
  if (reply.type == REDIS_REPLY_ERROR) return error_reply(reply);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4) return script_reply::malformed;
  return parse_outcome(reply.element, out);
}

script_reply parse_outcome_reply(const redisReply& reply, std::size_t elements,
                                 detail::limit_outcome& out) noexcept {
  if (reply.type == REDIS_REPLY_ERROR) return error_reply(reply);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != elements || elements < 4)
    return script_reply::malformed;
  return parse_outcome(reply.element, out);
}

std::error_code to_decision(const redisReply& reply, std::uint64_t limit, decision& out) noexcept {
  detail::limit_outcome o;
  if (const auto ec = to_error(parse_decide_reply(reply, o))) return ec;
  out = detail::to_decision(o, limit);
  return {};
}

std::error_code to_error(script_reply r) noexcept {
  switch (r) {
    case script_reply::decided:
      return {};
    case script_reply::noscript:
    case script_reply::failed:
      return make_error_code(errc::backend_script_error);
    case script_reply::malformed:
      break;
  }
  return make_error_code(errc::backend_protocol_error);
}

}  // namespace sluice::redis
