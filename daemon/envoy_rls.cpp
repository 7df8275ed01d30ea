#include "envoy_rls.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <span>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <google/protobuf/util/json_util.h>

#include <sluice/error.hpp>
#include <sluice/limiter.hpp>

#include "complete_on.hpp"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "metrics.hpp"
#include "service.hpp"

namespace sluice::daemon {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;

// The reference counts a hit as "near the limit" past this share of it (NEAR_LIMIT_RATIO).
constexpr double near_limit_ratio = 0.8;

enum class item_kind : std::uint8_t {
  none,    // no limit applies: OK without asking anyone
  over,    // over before asking: a limit of 0, or more hits than the limit holds
  main,    // a non-shadow limit that spends: decided with the others in one check_all
  shadow,  // a shadow-mode limit that spends: decided on its own
  quota,   // a quota-mode limit that spends: decided on its own, before the `main` ones
  peek,    // hits 0 (or the request is denied already): looked at, nothing spent
};

// `unavailable` has no counterpart among the library's failure modes: its limits deny
// (closed, so nothing is admitted by accident) and a degraded decision turns the whole
// answer into UNAVAILABLE.
failure_mode library_mode(rls_failure_mode m) {
  switch (m) {
    case rls_failure_mode::open:
      return failure_mode::open;
    case rls_failure_mode::local:
      return failure_mode::local;
    case rls_failure_mode::closed:
    case rls_failure_mode::unavailable:
      break;
  }
  return failure_mode::closed;
}

std::uint32_t clamp32(std::uint64_t v) {
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(v, std::numeric_limits<std::uint32_t>::max()));
}

// Time until the window of a limit counted with no backend (a 0 limit) starts again, as the
// reference's CalculateReset: windows aligned to the Unix epoch.
std::chrono::milliseconds until_window_end(std::chrono::milliseconds window) {
  if (window.count() <= 0) return std::chrono::milliseconds{0};
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return window - now % window;
}

// The reference's quota group of a quota-mode descriptor: the model it stands for (its
// `backend_name` and `model_name_override` values) when it names one, so that a model's
// buckets (a tenant's, the model's default) are enforced together while another model
// still takes the request; else all its entries, so unrelated descriptors never merge.
std::string quota_group_key(const envoy::rls_descriptor& d) {
  std::string backend;
  std::string model;
  std::string all;
  for (const auto& e : d.entries) {
    if (e.key == "backend_name") backend = e.value;
    if (e.key == "model_name_override") model = e.value;
    // Lengths first: no two entry lists give the same text.
    all +=
        std::to_string(e.key.size()) + ':' + e.key + std::to_string(e.value.size()) + ':' + e.value;
  }
  if (!backend.empty() || !model.empty()) {
    return 'm' + std::to_string(backend.size()) + ':' + backend + model;
  }
  return 'e' + all;
}

// The status the reference's headers describe: the one with a limit and the least room
// left (the first of equals), unless a limit outside quota mode is over (not a shadow
// limit's, whose code is OK): then the last such one, as the reference's loop leaves it.
const rls_status* headers_status(const rls_answer& a, const std::vector<char>& quota_member) {
  const rls_status* pick = nullptr;
  auto least = std::numeric_limits<std::uint32_t>::max();
  for (std::size_t i = 0; i < a.statuses.size(); ++i) {
    const auto& st = a.statuses[i];
    if (st.has_limit && st.limit_remaining < least) {
      pick = &st;
      least = st.limit_remaining;
    }
    if (st.code == rls_code::over_limit && !quota_member[i]) {
      pick = &st;
      least = 0;
    }
  }
  return pick;
}

// LIMIT_RESPONSE_HEADERS_ENABLED / LIMIT_REQUEST_HEADERS_ENABLED: the picked status's limit,
// room and reset, the reset in whole seconds rounded up (for a fixed window, the
// reference's seconds to the window's end).
void add_headers(const envoy_rls_config::response_headers_config& cfg, const rls_status& st,
                 std::vector<std::pair<std::string, std::string>>& out) {
  if (!cfg.enabled) return;
  const auto reset_s = (st.until_reset.count() + 999) / 1000;
  out.emplace_back(cfg.limit, std::to_string(st.requests_per_unit));
  out.emplace_back(cfg.remaining, std::to_string(st.limit_remaining));
  out.emplace_back(cfg.reset, std::to_string(reset_s));
}

// "Seconds", "Minutes", ...: the unit as the reference's per-unit header names spell it.
std::string_view unit_plural(envoy::rls_unit u) {
  switch (u) {
    case envoy::rls_unit::second:
      return "Seconds";
    case envoy::rls_unit::minute:
      return "Minutes";
    case envoy::rls_unit::hour:
      return "Hours";
    case envoy::rls_unit::day:
      return "Days";
    case envoy::rls_unit::week:
      return "Weeks";
    case envoy::rls_unit::month:
      return "Months";
    case envoy::rls_unit::year:
      return "Years";
    case envoy::rls_unit::unknown:
      break;
  }
  return "Unknowns";
}

// LIMIT_PER_UNIT_HEADERS_ENABLED: per unit (in the order the units first appear), the limit
// and room of its status with the least room (the first of equals).
void add_per_unit_headers(const rls_answer& a,
                          std::vector<std::pair<std::string, std::string>>& out) {
  std::vector<const rls_status*> per_unit;
  for (const auto& st : a.statuses) {
    if (!st.has_limit) continue;
    auto same = std::find_if(per_unit.begin(), per_unit.end(),
                             [&](const rls_status* p) { return p->unit == st.unit; });
    if (same == per_unit.end()) {
      per_unit.push_back(&st);
    } else if (st.limit_remaining < (*same)->limit_remaining) {
      *same = &st;
    }
  }
  for (const auto* st : per_unit) {
    const auto unit = unit_plural(st->unit);
    out.emplace_back(std::string("RateLimit-Limit-").append(unit),
                     std::to_string(st->requests_per_unit));
    out.emplace_back(std::string("RateLimit-Remaining-").append(unit),
                     std::to_string(st->limit_remaining));
  }
}

}  // namespace

struct rls_decider::job {
  std::shared_ptr<const runtime> rt;
  rls_request req;
  rls_failure_mode mode = rls_failure_mode::unavailable;
  boost::asio::any_io_executor ex;
  std::vector<envoy::rls_match> matches;
  std::vector<std::uint64_t> hits;
  std::vector<item_kind> kinds;
  std::vector<decision> decisions;
  std::vector<std::size_t> main_items;  // indexes of the `main` items, in request order
  // Quota mode: whether each descriptor is in a quota group, and which.
  std::vector<char> quota_member;
  std::vector<std::string> quota_group;
  // The `main` items wait for the `quota` ones: phase 0 decides everything else, phase 1
  // the `main` items (or only looks at them, when every quota group denies the request).
  bool main_after_quota = false;
  int phase = 0;
  // The asynchronous parts (Redis) complete on threads of the backend's choosing: what they
  // write is guarded, and the last one to come back answers.
  std::mutex mu;
  std::size_t pending = 0;  // asynchronous parts not yet back
  handler done;

  policy policy_of(std::size_t i) const {
    auto p = matches[i].policy;
    p.on_failure = library_mode(mode);
    return p;
  }
  std::uint64_t peek_cost(std::size_t i) const { return std::max<std::uint64_t>(1, hits[i]); }

  // Whether item i, decided, is over its limit (a peek of hits 0 never is).
  bool over(std::size_t i) const {
    if (kinds[i] == item_kind::none) return false;
    if (kinds[i] == item_kind::over) return true;
    return !decisions[i].allowed && hits[i] > 0;
  }
  // Every quota group has a limit over (a shadow limit's status is OK: never over), with
  // what is decided so far; false when there is no quota group.
  bool quota_denies() const {
    std::vector<std::pair<std::string_view, bool>> groups;
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      if (!quota_member[i]) continue;
      const bool o = !matches[i].shadow_mode && over(i);
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const auto& x) { return x.first == quota_group[i]; });
      if (g == groups.end()) {
        groups.emplace_back(quota_group[i], o);
      } else {
        g->second = g->second || o;
      }
    }
    return !groups.empty() &&
           std::all_of(groups.begin(), groups.end(), [](const auto& g) { return g.second; });
  }

  rls_answer finish(metrics& m) const;
};

rls_answer rls_decider::job::finish(metrics& m) const {
  const auto& rls = rt->cfg.envoy_rls;
  rls_answer a;
  const auto n = matches.size();
  a.statuses.resize(n);
  // A degraded decision under `unavailable`: the backend failed, no limit is answered.
  for (std::size_t i = 0; i < n; ++i) {
    if (kinds[i] != item_kind::none && kinds[i] != item_kind::over && decisions[i].degraded) {
      m.backend_error(decisions[i].backend_error);
      if (mode == rls_failure_mode::unavailable) {
        m.rls_error(req.domain, "redis_error");
        a.what = rls_answer::kind::unavailable;
        a.why = "the backend failed (" + decisions[i].backend_error.message() + ")";
        a.statuses.clear();
        return a;
      }
    }
  }
  bool hard_over = false;  // a limit outside quota (and shadow) mode is over
  for (std::size_t i = 0; i < n; ++i) {
    const auto& match = matches[i];
    auto& st = a.statuses[i];
    st.code = rls_code::ok;
    if (kinds[i] == item_kind::none) {
      // The reference: an unlimited descriptor has all the room there is; no match, none.
      if (match.unlimited) st.limit_remaining = std::numeric_limits<std::uint32_t>::max();
      continue;
    }
    st.has_limit = true;
    st.name = match.name;
    st.requests_per_unit = match.requests_per_unit;
    st.unit = match.unit;
    const bool over = this->over(i);
    std::uint64_t remaining = 0;
    if (kinds[i] == item_kind::over) {
      st.until_reset = until_window_end(envoy::unit_window(match.unit));
    } else {
      const auto& d = decisions[i];
      remaining = over ? 0 : d.remaining;
      st.until_reset = over && d.retry_after.count() > 0 ? d.retry_after : d.reset_after;
    }
    st.limit_remaining = clamp32(remaining);
    const bool shadow = match.shadow_mode;
    if (over && !shadow) {
      // A quota-mode limit says so in its status; only its group's state decides.
      st.code = rls_code::over_limit;
      if (!quota_member[i]) hard_over = true;
    }
    if (hits[i] == 0) continue;  // nothing counted, as in the reference
    std::uint64_t near = 0;
    if (!over && kinds[i] != item_kind::over) {
      const auto limit = limit_of(match.policy);
      const auto used = limit - std::min(limit, remaining);
      const auto threshold =
          static_cast<std::uint64_t>(static_cast<double>(limit) * near_limit_ratio);
      if (used > threshold) near = std::min(hits[i], used - threshold);
    }
    // Let through by shadow mode, the limit's own or the service's.
    const bool shadowed = over && (shadow || rls.shadow_mode);
    m.rls_descriptor(req.domain, match.metric_key, hits[i], over, near, shadowed);
  }
  if (hard_over || quota_denies()) a.overall = rls_code::over_limit;
  if (rls.per_unit_headers) add_per_unit_headers(a, a.response_headers);
  if (const auto* st = headers_status(a, quota_member)) {
    add_headers(rls.response_headers, *st, a.response_headers);
    add_headers(rls.request_headers, *st, a.request_headers);
  }
  // As the reference's SHADOW_MODE: decided and counted as ever, answered OK.
  if (rls.shadow_mode && a.overall == rls_code::over_limit) {
    a.overall = rls_code::ok;
    m.rls_global_shadow_mode();
  }
  return a;
}

rls_decider::rls_decider(metrics& m) : metrics_(m) {}

rls_decider::~rls_decider() = default;

void rls_decider::decide(std::shared_ptr<const runtime> rt, rls_request req,
                         boost::asio::any_io_executor ex, handler done) {
  const auto& rls = rt->cfg.envoy_rls;
  if (!rls.enabled()) {
    rls_answer a;
    a.what = rls_answer::kind::disabled;
    a.why = "the config has no envoy_rls section";
    return done(std::move(a));
  }
  auto invalid = [&](std::string why) {
    // An unknown domain is the client's text: not a label of ours.
    const bool known = rls.limits->find(req.domain) != nullptr;
    metrics_.rls_error(known ? std::string_view(req.domain) : std::string_view(), "service_error");
    rls_answer a;
    a.what = rls_answer::kind::invalid;
    a.why = std::move(why);
    done(std::move(a));
  };
  // As the reference refuses them.
  if (req.domain.empty()) return invalid("rate limit domain must not be empty");
  if (req.descriptors.empty()) return invalid("rate limit descriptor list must not be empty");
  // Bounded before any work, so that one call cannot buy seconds of CPU.
  if (req.descriptors.size() > rls.max_descriptors) {
    return invalid("rate limit descriptor list has " + std::to_string(req.descriptors.size()) +
                   " descriptors; envoy_rls.max_descriptors is " +
                   std::to_string(rls.max_descriptors));
  }
  for (std::size_t i = 0; i < req.descriptors.size(); ++i) {
    if (req.descriptors[i].entries.size() > rls.max_descriptor_entries) {
      return invalid("descriptor " + std::to_string(i) + " has " +
                     std::to_string(req.descriptors[i].entries.size()) +
                     " entries; envoy_rls.max_descriptor_entries is " +
                     std::to_string(rls.max_descriptor_entries));
    }
  }

  auto j = std::make_shared<job>();
  j->rt = rt;
  j->mode = rls.on_backend_failure;
  j->matches = envoy::match_descriptors(*rls.limits, req.domain, req.descriptors);
  const auto n = req.descriptors.size();
  j->hits.resize(n);
  j->kinds.resize(n, item_kind::none);
  j->decisions.resize(n);
  j->quota_member.resize(n, 0);
  j->quota_group.resize(n);
  const std::uint64_t request_hits = std::max<std::uint32_t>(1, req.hits_addend);
  bool denied_already = false;
  bool quota_async = false;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& d = req.descriptors[i];
    const auto& m = j->matches[i];
    j->hits[i] = d.hits_addend ? *d.hits_addend : request_hits;
    // As the reference: an unlimited descriptor is in no group; under the service's
    // quota_mode every other one is, also one no limit matched (never over).
    const bool quota = !m.unlimited && (rls.quota_mode || (m.matched && m.quota_mode));
    if (quota) {
      j->quota_member[i] = 1;
      j->quota_group[i] = quota_group_key(d);
    }
    if (!m.matched) continue;
    if (m.requests_per_unit == 0 || j->hits[i] > limit_of(m.policy)) {
      j->kinds[i] = item_kind::over;
      denied_already = denied_already || (!m.shadow_mode && !quota);
      continue;
    }
    // Validated once, not per call: a config limit's policy when the config loaded
    // (rls_config), an override's where the match built it (a fixed window of 1..
    // max_capacity per unit); and the cost is 1..limit_of(policy) by the test above. Only the
    // bucket key, made of the request's entries, can be out of bounds (it is never empty).
    assert(!validate(m.policy));
    assert(!m.bucket_key.empty() && j->peek_cost(i) <= limit_of(m.policy));
    if (m.bucket_key.size() > max_key_size) {
      return invalid("descriptor " + std::to_string(i) + ": " +
                     make_error_code(errc::key_too_long).message());
    }
    j->kinds[i] = j->hits[i] == 0 ? item_kind::peek
                  : m.shadow_mode ? item_kind::shadow
                  : quota         ? item_kind::quota
                                  : item_kind::main;
    quota_async = quota_async || j->kinds[i] == item_kind::quota;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (j->kinds[i] != item_kind::main) continue;
    // A request one limit denies already spends nothing: the others are only looked at.
    if (denied_already) {
      j->kinds[i] = item_kind::peek;
    } else {
      j->main_items.push_back(i);
    }
  }
  j->main_after_quota = quota_async && !j->main_items.empty();
  j->req = std::move(req);
  j->ex = std::move(ex);
  j->done = std::move(done);
  launch(j);
}

void rls_decider::launch(const std::shared_ptr<job>& j) {
  auto& lim = j->rt->limiter_here();
  const auto n = j->kinds.size();
  const bool first = j->phase == 0;
  std::vector<std::size_t> singles;  // decided each on its own (shadow, quota, peek)
  if (first) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto k = j->kinds[i];
      if (k == item_kind::shadow || k == item_kind::quota || k == item_kind::peek)
        singles.push_back(i);
    }
  }
  std::vector<check_item> items;  // the `main` ones, together
  if ((!first || !j->main_after_quota) && !j->main_items.empty()) {
    if (j->quota_denies()) {
      // A request every quota group denies spends nothing on its other limits either.
      for (auto i : j->main_items) {
        j->kinds[i] = item_kind::peek;
        singles.push_back(i);
      }
      j->main_items.clear();
    }
    items.reserve(j->main_items.size());
    for (auto i : j->main_items) {
      items.push_back({j->matches[i].bucket_key, j->policy_of(i), j->hits[i]});
    }
  }

  // Every part asynchronous, completed where the backend completes it (inline on the
  // memory backend, else the Redis connection's I/O thread), with no hop between: the last
  // part back starts the next phase or answers, inline when `ex` is empty, else on `ex` (at
  // once when that is where it completed: complete_on.hpp). Each part stores its decisions
  // under j->mu; the one that brings the count to 0 goes on outside the lock (what follows
  // reads what every part wrote, and no part writes any more).
  auto part_done = [this](const std::shared_ptr<job>& jb, auto&& store) {
    {
      std::lock_guard lock(jb->mu);
      store();
      if (--jb->pending != 0) return;
    }
    if (jb->phase == 0 && jb->main_after_quota) {
      jb->phase = 1;
      return launch(jb);
    }
    if (jb->ex) {
      complete_on(jb->ex, [this, jb] { jb->done(jb->finish(metrics_)); });
    } else {
      jb->done(jb->finish(metrics_));
    }
  };
  // Hold the count up while the parts start: a part completing during the loop (inline, or
  // on the I/O thread already) must not go on early. (The loop only reads what the parts
  // do not write.)
  {
    std::lock_guard lock(j->mu);
    j->pending = (items.empty() ? 0 : 1) + singles.size() + 1;
  }
  if (items.size() == 1) {
    // One limit: the single-key check, without the list's copies.
    const auto& it = items.front();
    lim.async_check(on_backend_thread, it.key, it.policy, it.cost,
                    [j, part_done](std::error_code, decision d) {
                      part_done(j, [&] { j->decisions[j->main_items.front()] = d; });
                    });
  } else if (!items.empty()) {
    lim.async_check_all(on_backend_thread, items,
                        [j, part_done](std::error_code, std::vector<decision> ds) {
                          part_done(j, [&] {
                            for (std::size_t k = 0; k < ds.size(); ++k)
                              j->decisions[j->main_items[k]] = ds[k];
                          });
                        });
  }
  for (auto i : singles) {
    if (j->kinds[i] == item_kind::peek) {
      lim.async_operate(on_backend_thread, j->matches[i].bucket_key, j->policy_of(i),
                        key_operation::peek, j->peek_cost(i),
                        [j, i, part_done](std::error_code, decision d) {
                          part_done(j, [&] { j->decisions[i] = d; });
                        });
    } else {
      lim.async_check(on_backend_thread, j->matches[i].bucket_key, j->policy_of(i), j->hits[i],
                      [j, i, part_done](std::error_code, decision d) {
                        part_done(j, [&] { j->decisions[i] = d; });
                      });
    }
  }
  part_done(j, [] {});
}

rls_request from_proto(const pb::RateLimitRequest& m) {
  rls_request r;
  r.domain = m.domain();
  r.hits_addend = m.hits_addend();
  r.descriptors.reserve(static_cast<std::size_t>(m.descriptors_size()));
  for (const auto& d : m.descriptors()) {
    envoy::rls_descriptor out;
    out.entries.reserve(static_cast<std::size_t>(d.entries_size()));
    for (const auto& e : d.entries()) out.entries.push_back({e.key(), e.value()});
    if (d.has_limit()) {
      const auto u = d.limit().unit();
      // RateLimitUnit is 0..6 on the wire; anything else (an open enum) is unknown.
      out.limit = envoy::rls_override{
          d.limit().requests_per_unit(),
          u >= 0 && u <= 6 ? static_cast<envoy::rls_unit>(u) : envoy::rls_unit::unknown};
    }
    if (d.has_hits_addend()) out.hits_addend = d.hits_addend().value();
    r.descriptors.push_back(std::move(out));
  }
  return r;
}

void to_proto(const rls_answer& a, pb::RateLimitResponse& m) {
  m.set_overall_code(static_cast<pb::RateLimitResponse::Code>(a.overall));
  for (const auto& s : a.statuses) {
    auto* st = m.add_statuses();
    st->set_code(static_cast<pb::RateLimitResponse::Code>(s.code));
    st->set_limit_remaining(s.limit_remaining);
    if (!s.has_limit) continue;
    auto* limit = st->mutable_current_limit();
    limit->set_name(s.name);
    limit->set_requests_per_unit(s.requests_per_unit);
    limit->set_unit(static_cast<pb::RateLimitResponse::RateLimit::Unit>(s.unit));
    auto* d = st->mutable_duration_until_reset();
    d->set_seconds(s.until_reset.count() / 1000);
    d->set_nanos(static_cast<std::int32_t>(s.until_reset.count() % 1000) * 1'000'000);
  }
  for (const auto& [name, value] : a.response_headers) {
    auto* h = m.add_response_headers_to_add();
    h->set_key(name);
    h->set_value(value);
  }
  for (const auto& [name, value] : a.request_headers) {
    auto* h = m.add_request_headers_to_add();
    h->set_key(name);
    h->set_value(value);
  }
}

std::optional<rls_request> parse_json_request(std::string_view body, std::string& why) {
  pb::RateLimitRequest m;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;  // a typo must not silently mean "unset"
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(body.data(), body.size()), &m, opts);
  if (!status.ok()) {
    why = std::string(status.message());
    return std::nullopt;
  }
  return from_proto(m);
}

std::string json_response(const rls_answer& a) {
  pb::RateLimitResponse m;
  to_proto(a, m);
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  // As the reference's /json (protojson): lowerCamelCase names, defaults left out.
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  out += '\n';
  return out;
}

}  // namespace sluice::daemon
