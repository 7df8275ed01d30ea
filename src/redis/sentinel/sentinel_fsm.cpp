#include "redis/sentinel/sentinel_fsm.hpp"

#include <charconv>
#include <utility>

namespace sluice::redis::sentinel {

std::optional<master_address> parse_master_address(const redisReply& reply) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 ||
      reply.element[0]->type != REDIS_REPLY_STRING ||
      reply.element[1]->type != REDIS_REPLY_STRING) {
    return std::nullopt;
  }
  master_address a;
  a.host = std::string(reply_text(*reply.element[0]));
  const auto port = reply_text(*reply.element[1]);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || value == 0 || value > 65535 ||
      a.host.empty()) {
    return std::nullopt;
  }
  a.port = static_cast<std::uint16_t>(value);
  return a;
}

resolver::step resolver::start(clock::time_point now) {
  asking_ = true;
  ever_ = true;
  last_ = now;
  next_ = 0;
  return {step::kind::ask, 0, {}, false};
}

resolver::step resolver::poll(clock::time_point now) {
  if (asking_) return {};
  return start(now);
}

resolver::step resolver::request(clock::time_point now) {
  if (asking_ || (ever_ && now - last_ < min_interval_)) return {};
  return start(now);
}

resolver::step resolver::on_answer(std::size_t i, std::error_code ec, const redisReply* reply) {
  if (!asking_ || i != next_) return {};  // not this round's question
  const auto a = !ec && reply ? parse_master_address(*reply) : std::nullopt;
  if (!a) {
    if (++next_ < sentinels_) return {step::kind::ask, next_, {}, false};
    asking_ = false;
    const bool warn = !std::exchange(warned_, true);
    return {step::kind::no_master, 0, {}, warn};
  }
  asking_ = false;
  warned_ = false;
  if (serving_ == a) return {};
  return {step::kind::use, 0, *a, false};
}

}  // namespace sluice::redis::sentinel
