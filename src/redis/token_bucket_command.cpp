#include "redis/token_bucket_command.hpp"

#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include <array>
#include <charconv>

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

// No bucket waits longer than the largest one takes to refill from empty at the lowest
// rate (1e9 tokens at 0.001/s: 1e15 ms, the rate being at least 1 micro-token per ms).
constexpr long long longest_wait_ms =
    static_cast<long long>(max_capacity) * detail::micro_tokens_per_token;

// {allowed 0|1, remaining whole tokens, retry_after_ms, reset_after_ms} at e[0..3].
script_reply parse_outcome(const redisReply* const* e, detail::token_bucket_outcome& out) noexcept {
  for (std::size_t i = 0; i < 4; ++i) {
    if (!e[i] || e[i]->type != REDIS_REPLY_INTEGER || e[i]->integer < 0)
      return script_reply::malformed;
  }
  const long long allowed = e[0]->integer;
  // Bounds keep the conversion to micro-tokens, and the wait's conversion to seconds in the
  // response headers, from overflowing on a nonsense reply.
  if (allowed > 1 || e[1]->integer > static_cast<long long>(max_capacity) ||
      e[2]->integer > longest_wait_ms || e[3]->integer > longest_wait_ms)
    return script_reply::malformed;
  out = {};
  out.allowed = allowed == 1;
  out.remaining_ut = e[1]->integer * detail::micro_tokens_per_token;
  out.retry_after_ms = e[2]->integer;
  out.reset_after_ms = e[3]->integer;
  if (out.allowed && out.retry_after_ms != 0) return script_reply::malformed;
  return script_reply::decided;
}

}  // namespace

void append_token_bucket_command(std::string& out, script_call call, std::string_view full_key,
                                 const detail::token_bucket_params& params,
                                 std::optional<std::int64_t> now_ms) {
  const decimal cap(params.capacity_ut), rate(params.rate_ut_per_ms), cost(params.cost_ut),
      now(now_ms.value_or(0));
  const std::string_view script = call == script_call::evalsha ? detail::lua_token_bucket.sha1
                                                               : detail::lua_token_bucket.source;
  const std::array<std::string_view, 8> args{call == script_call::evalsha ? "EVALSHA" : "EVAL",
                                             script,
                                             "1",
                                             full_key,
                                             cap.view(),
                                             rate.view(),
                                             cost.view(),
                                             now.view()};
  append_command(out, args.data(), now_ms ? 8 : 7);
}

namespace {

void append_multi(std::string& out, script_call call, const detail::lua_script& script,
                  std::span<const multi_key> keys, std::optional<std::int64_t> now_ms) {
  std::vector<decimal> numbers;
  numbers.reserve(3 * keys.size() + 2);
  numbers.emplace_back(static_cast<std::int64_t>(keys.size()));
  for (const auto& k : keys) {
    numbers.emplace_back(k.params.capacity_ut);
    numbers.emplace_back(k.params.rate_ut_per_ms);
    numbers.emplace_back(k.params.cost_ut);
  }
  if (now_ms) numbers.emplace_back(*now_ms);
  std::vector<std::string_view> args;
  args.reserve(3 + 4 * keys.size() + 1);
  args.push_back(call == script_call::evalsha ? "EVALSHA" : "EVAL");
  args.push_back(call == script_call::evalsha ? script.sha1 : script.source);
  args.push_back(numbers[0].view());
  for (const auto& k : keys) args.push_back(k.full_key);
  for (std::size_t i = 1; i < numbers.size(); ++i) args.push_back(numbers[i].view());
  append_command(out, args.data(), args.size());
}

}  // namespace

void append_token_bucket_multi_command(std::string& out, script_call call,
                                       std::span<const multi_key> keys,
                                       std::optional<std::int64_t> now_ms) {
  append_multi(out, call, detail::lua_token_bucket_multi, keys, now_ms);
}

void append_token_bucket_batch_command(std::string& out, script_call call,
                                       std::span<const multi_key> keys,
                                       std::optional<std::int64_t> now_ms) {
  // Runs of consecutive items with the same parameters: count, capacity, rate, cost.
  std::vector<decimal> numbers;
  numbers.reserve(6);  // one run: a batch is mostly checks of one policy
  numbers.emplace_back(static_cast<std::int64_t>(keys.size()));
  if (now_ms) numbers.emplace_back(*now_ms);
  const std::size_t first_run = numbers.size();
  for (std::size_t i = 0; i < keys.size();) {
    const auto& p = keys[i].params;
    std::size_t j = i + 1;
    while (j < keys.size() && keys[j].params.capacity_ut == p.capacity_ut &&
           keys[j].params.rate_ut_per_ms == p.rate_ut_per_ms && keys[j].params.cost_ut == p.cost_ut)
      ++j;
    numbers.emplace_back(static_cast<std::int64_t>(j - i));
    numbers.emplace_back(p.capacity_ut);
    numbers.emplace_back(p.rate_ut_per_ms);
    numbers.emplace_back(p.cost_ut);
    i = j;
  }
  const auto& script = detail::lua_token_bucket_batch;
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

void append_token_bucket_refund_command(std::string& out, script_call call,
                                        std::span<const multi_key> keys) {
  append_multi(out, call, detail::lua_token_bucket_refund, keys, std::nullopt);
}

script_reply parse_token_bucket_multi_reply(const redisReply& reply, std::size_t n,
                                            std::vector<detail::token_bucket_outcome>& out) {
  out.clear();
  if (reply.type == REDIS_REPLY_ERROR) {
    return is_error(reply, "NOSCRIPT") ? script_reply::noscript : script_reply::failed;
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != n) return script_reply::malformed;
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const redisReply* e = reply.element[i];
    // An error inside the array is nonsense too: the script replies with errors whole.
    if (!e || e->type != REDIS_REPLY_ARRAY) return script_reply::malformed;
    if (parse_token_bucket_reply(*e, out[i]) != script_reply::decided)
      return script_reply::malformed;
  }
  return script_reply::decided;
}

script_reply parse_token_bucket_batch_reply(const redisReply& reply, std::size_t n,
                                            std::vector<batch_item>& out) {
  out.clear();
  if (reply.type == REDIS_REPLY_ERROR) {
    return is_error(reply, "NOSCRIPT") ? script_reply::noscript : script_reply::failed;
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4 * n) return script_reply::malformed;
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* item = reply.element + 4 * i;
    script_reply r = script_reply::malformed;
    if (item[0] && item[0]->type == REDIS_REPLY_ERROR) {
      // NOSCRIPT is not something an item can say: nonsense.
      r = is_error(*item[0], "NOSCRIPT") ? script_reply::malformed : script_reply::failed;
    } else {
      r = parse_outcome(item, out[i].outcome);
    }
    out[i].ec = to_error(r);
  }
  return script_reply::decided;
}

std::error_code to_decisions(const redisReply& reply, std::span<const std::uint64_t> capacities,
                             std::vector<decision>& out) {
  std::vector<detail::token_bucket_outcome> os;
  if (const auto ec = to_error(parse_token_bucket_multi_reply(reply, capacities.size(), os)))
    return ec;
  out.clear();
  out.reserve(os.size());
  for (std::size_t i = 0; i < os.size(); ++i) {
    out.push_back(detail::to_decision(os[i], capacities[i]));
  }
  return {};
}

script_reply parse_token_bucket_reply(const redisReply& reply,
                                      detail::token_bucket_outcome& out) noexcept {
  if (reply.type == REDIS_REPLY_ERROR) {
    return is_error(reply, "NOSCRIPT") ? script_reply::noscript : script_reply::failed;
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4) return script_reply::malformed;
  return parse_outcome(reply.element, out);
}

std::error_code to_decision(const redisReply& reply, std::uint64_t capacity,
                            decision& out) noexcept {
  detail::token_bucket_outcome o;
  if (const auto ec = to_error(parse_token_bucket_reply(reply, o))) return ec;
  out = detail::to_decision(o, capacity);
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
