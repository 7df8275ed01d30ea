#include "redis/sentinel/sentinel_fsm.hpp"

#include <charconv>
#include <utility>

#include "core/log.hpp"

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

void sentinel_address::resolve(clock::time_point now, address_source::resolve_handler done) {
  if (stopped_) {
    done(std::nullopt);
    return;
  }
  // Waits for the round this starts, or the one running; answered by finish_round (inline
  // when the resolver starts nothing).
  waiting_.push_back(std::move(done));
  run(resolver_.request(now));
}

void sentinel_address::run(const resolver::step& next) {
  if (stopped_) return;
  switch (next.what) {
    case resolver::step::kind::ask:
      ask_(next.sentinel);  // its answer may come back inline: on_answer ends the round
      return;
    case resolver::step::kind::use:
      if (served()) {
        moves_.fetch_add(1, std::memory_order_relaxed);
        moved_now_ = true;
        sluice::detail::logf(sluice::log_level::info,
                             "sluice sentinel: master \"{}\" is {}:{} (failed over)", master_name_,
                             next.master.host, next.master.port);
      } else {
        sluice::detail::logf(sluice::log_level::info, "sluice sentinel: master \"{}\" is {}:{}",
                             master_name_, next.master.host, next.master.port);
      }
      resolver_.serving(next.master);
      break;
    case resolver::step::kind::no_master:
      if (next.warn) {
        sluice::detail::logf(sluice::log_level::warn,
                             "sluice sentinel: no sentinel knows master \"{}\"; asking again",
                             master_name_);
      }
      break;
    case resolver::step::kind::nothing:
      break;
  }
  if (!resolver_.asking()) finish_round();
}

void sentinel_address::finish_round() {
  // The waiting attempts first: a connection that waits connects to the answer, and the
  // move below then finds it there already.
  auto waiting = std::exchange(waiting_, {});
  for (auto& done : waiting) done(served());
  if (std::exchange(moved_now_, false) && moved_ && served()) moved_(*served());
  if (round_end_) round_end_();
}

void sentinel_address::stop() {
  stopped_ = true;
  auto waiting = std::exchange(waiting_, {});
  for (auto& done : waiting) done(std::nullopt);
}

}  // namespace sluice::redis::sentinel
