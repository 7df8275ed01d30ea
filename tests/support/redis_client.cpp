#include "support/redis_client.hpp"

#include <stdexcept>

#include "redis/decide_command.hpp"

namespace sluice::test {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  return {static_cast<time_t>(d.count() / 1000), static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

}  // namespace

redis_client::redis_client(std::uint16_t port, std::chrono::milliseconds timeout,
                           const std::string& password)
    : ctx_(redisConnectWithTimeout("127.0.0.1", port, to_timeval(timeout))) {
  if (!ctx_) throw std::runtime_error("redis_client: out of memory");
  if (ctx_->err)
    throw std::runtime_error("redis_client: cannot connect to 127.0.0.1:" + std::to_string(port) +
                             ": " + ctx_->errstr);
  redisSetTimeout(ctx_.get(), to_timeval(timeout));
  if (!password.empty()) {
    const auto r = command({"AUTH", password});
    if (redis::is_error(*r))
      throw std::runtime_error("redis_client: AUTH: " + std::string(redis::reply_text(*r)));
  }
}

redis::reply_ptr redis_client::command(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redis::reply_ptr r(static_cast<redisReply*>(
      redisCommandArgv(ctx_.get(), static_cast<int>(args.size()), argv.data(), lens.data())));
  if (!r) throw std::runtime_error(std::string("redis_client: ") + ctx_->errstr);
  return r;
}

redis::reply_ptr redis_client::command(std::initializer_list<std::string_view> args) {
  std::vector<std::string> v;
  for (auto a : args) v.emplace_back(a);
  return command(v);
}

redis::reply_ptr redis_client::transaction(const std::string& formatted, std::size_t count) {
  std::string all;
  redis::append_command(all, {"MULTI"});
  all += formatted;
  redis::append_command(all, {"EXEC"});
  if (redisAppendFormattedCommand(ctx_.get(), all.data(), all.size()) != REDIS_OK)
    throw std::runtime_error(std::string("redis_client: ") + ctx_->errstr);
  redis::reply_ptr last;
  for (std::size_t i = 0; i < count + 2; ++i) {  // +OK, QUEUED per command, then EXEC's
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || !raw)
      throw std::runtime_error(std::string("redis_client: ") + ctx_->errstr);
    last.reset(static_cast<redisReply*>(raw));
    if (redis::is_error(*last))
      throw std::runtime_error("redis_client: transaction: " +
                               std::string(redis::reply_text(*last)));
  }
  if (last->type != REDIS_REPLY_ARRAY || last->elements != count)
    throw std::runtime_error("redis_client: transaction was aborted");
  return last;
}

std::optional<std::string> redis_client::get(std::string_view key) {
  auto r = command({"GET", key});
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type != REDIS_REPLY_STRING) throw std::runtime_error("redis_client: GET failed");
  return std::string(r->str, r->len);
}

std::int64_t redis_client::pttl(std::string_view key) {
  auto r = command({"PTTL", key});
  if (r->type != REDIS_REPLY_INTEGER) throw std::runtime_error("redis_client: PTTL failed");
  return r->integer;
}

void redis_client::script_flush() {
  auto r = command({"SCRIPT", "FLUSH"});
  if (redis::is_error(*r)) throw std::runtime_error("redis_client: SCRIPT FLUSH failed");
}

void redis_client::flush_all() {
  auto r = command({"FLUSHALL"});
  if (redis::is_error(*r)) throw std::runtime_error("redis_client: FLUSHALL failed");
}

detail::limit_outcome redis_client::eval_decide(std::string_view key,
                                               const detail::limit_params& p,
                                               std::int64_t now_ms) {
  // The product's own formatter, so the test exercises the ARGV it really sends.
  std::string cmd;
  redis::append_decide_command(cmd, redis::script_call::eval, key, p, now_ms);
  if (redisAppendFormattedCommand(ctx_.get(), cmd.data(), cmd.size()) != REDIS_OK)
    throw std::runtime_error(std::string("redis_client: ") + ctx_->errstr);
  void* raw = nullptr;
  if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || !raw)
    throw std::runtime_error(std::string("redis_client: ") + ctx_->errstr);
  redis::reply_ptr r(static_cast<redisReply*>(raw));
  detail::limit_outcome o;
  if (redis::parse_decide_reply(*r, o) != redis::script_reply::decided)
    throw std::runtime_error("redis_client: decision script failed: " +
                             std::string(redis::reply_text(*r)));
  return o;
}

}  // namespace sluice::test
