#include <sluice/http/evaluate.hpp>

#include <atomic>

#include "http/key_hash.hpp"

namespace sluice::http {
namespace {

// Decides allowed and binding once every outcome is known.
void finish(evaluation& e) {
  e.allowed = true;
  e.binding.reset();
  for (std::size_t i = 0; i < e.outcomes.size(); ++i) {
    const auto& o = e.outcomes[i];
    if (o.skipped || o.shadow) continue;
    if (!o.result.allowed) e.allowed = false;
  }
  for (std::size_t i = 0; i < e.outcomes.size(); ++i) {
    const auto& o = e.outcomes[i];
    if (o.skipped || o.shadow) continue;
    if (!e.binding) {
      e.binding = i;
      continue;
    }
    const auto& b = e.outcomes[*e.binding].result;
    if (!e.allowed) {
      // Among denials, the one the client must wait longest for.
      if (!o.result.allowed && (b.allowed || o.result.retry_after > b.retry_after)) e.binding = i;
    } else if (o.result.remaining < b.remaining) {
      e.binding = i;
    }
  }
}

}  // namespace

const sluice::policy* evaluation::binding_policy() const noexcept {
  const auto* o = binding_outcome();
  return (o && rules) ? rules->find_policy(o->policy) : nullptr;
}

bool evaluation::degraded() const noexcept {
  for (const auto& o : outcomes) {
    if (!o.skipped && o.result.degraded) return true;
  }
  return false;
}

namespace detail {

evaluation plan(std::shared_ptr<const rule_set> rules, const request_facts& req) {
  evaluation e;
  e.rules = std::move(rules);
  if (!e.rules) return e;
  for (auto i : e.rules->matching(req)) {
    const auto& r = e.rules->rules()[i];
    rule_outcome o;
    o.rule_index = i;
    o.rule = r.name;
    o.policy = r.policy;
    o.shadow = r.shadow;
    if (auto k = r.key.derive(req, e.rules->options())) {
      o.key = limiter_key(r.name, r.policy, *k);
    } else {
      o.skipped = true;
    }
    e.outcomes.push_back(std::move(o));
  }
  return e;
}

void start_evaluate(limiter lim, evaluation planned, std::function<void(evaluation)> done) {
  struct state {
    evaluation e;
    std::function<void(evaluation)> done;
    std::atomic<std::size_t> pending{0};
  };
  auto st = std::make_shared<state>();
  st->e = std::move(planned);
  st->done = std::move(done);
  std::vector<std::size_t> to_check;
  for (std::size_t i = 0; i < st->e.outcomes.size(); ++i) {
    if (!st->e.outcomes[i].skipped) to_check.push_back(i);
  }
  if (to_check.empty()) {
    finish(st->e);
    st->done(std::move(st->e));
    return;
  }
  // Each handler writes only its own outcome; the last one to finish (acq_rel on the
  // counter orders the writes before it) completes the evaluation.
  st->pending.store(to_check.size(), std::memory_order_relaxed);
  for (auto i : to_check) {
    const auto& o = st->e.outcomes[i];
    const auto& r = st->e.rules->rules()[o.rule_index];
    const auto* p = st->e.rules->find_policy(r.policy);
    lim.async_check(o.key, *p, r.cost, [st, i](std::error_code ec, decision d) {
      auto& out = st->e.outcomes[i];
      out.result = d;
      if (ec) {
        out.error = ec;
        out.skipped = true;
      }
      if (st->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        finish(st->e);
        st->done(std::move(st->e));
      }
    });
  }
}

}  // namespace detail

evaluation evaluate(limiter& lim, std::shared_ptr<const rule_set> rules, const request_facts& req) {
  auto e = detail::plan(std::move(rules), req);
  for (auto& o : e.outcomes) {
    if (o.skipped) continue;
    const auto& r = e.rules->rules()[o.rule_index];
    std::error_code ec;
    o.result = lim.check(o.key, *e.rules->find_policy(r.policy), r.cost, ec);
    if (ec) {
      o.error = ec;
      o.skipped = true;
    }
  }
  finish(e);
  return e;
}

}  // namespace sluice::http
