#include <sluice/http/evaluate.hpp>

#include <atomic>
#include <vector>

#include <sluice/policy.hpp>

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

evaluation plan(std::shared_ptr<const rule_set> rules, const request_facts& req) {
  evaluation e;
  e.rules = std::move(rules);
  if (!e.rules) return e;
  for (auto i : e.rules->matching(req)) {
    const auto& r = e.rules->rules()[i];
    // A concurrency rule holds a slot for the request's duration: enter_concurrency()'s.
    if (e.rules->find_policy(r.policy) == nullptr) continue;
    rule_outcome o;
    o.rule_index = i;
    o.rule = r.name;
    o.policy = r.policy;
    if (const auto* p = e.rules->find_policy(r.policy)) o.on_failure = p->on_failure;
    o.shadow = r.shadow;
    if (auto k = r.key.derive(req, e.rules->options())) {
      o.key = detail::limiter_key(r.name, r.policy, *k);
    } else {
      o.skipped = true;
    }
    e.outcomes.push_back(std::move(o));
  }
  return e;
}

namespace {

// Which outcomes are decided how: the enforcing (non-shadow) rules together, all or
// nothing; shadow rules, and input the limiter will reject, one by one as before.
struct split {
  std::vector<std::size_t> together;
  std::vector<std::size_t> alone;
};

split split_outcomes(const evaluation& e) {
  split s;
  for (std::size_t i = 0; i < e.outcomes.size(); ++i) {
    const auto& o = e.outcomes[i];
    if (o.skipped) continue;
    const auto& r = e.rules->rules()[o.rule_index];
    // The policy and the cost were checked when the rule_set was built: the key is new.
    const bool valid = !validate(o.key, *e.rules->find_valid_policy(r.policy), r.cost);
    (!o.shadow && valid ? s.together : s.alone).push_back(i);
  }
  // One enforcing rule is a plain check: the same call as without multi-key support.
  if (s.together.size() == 1) {
    s.alone.push_back(s.together.front());
    s.together.clear();
  }
  return s;
}

std::vector<check_item> items_of(const evaluation& e, const std::vector<std::size_t>& which) {
  std::vector<check_item> items;
  items.reserve(which.size());
  for (auto i : which) {
    const auto& o = e.outcomes[i];
    const auto& r = e.rules->rules()[o.rule_index];
    items.push_back({o.key, *e.rules->find_policy(r.policy), r.cost});
  }
  return items;
}

void record(rule_outcome& out, std::error_code ec, const decision& d) {
  out.result = d;
  if (ec) {
    out.error = ec;
    out.skipped = true;
  }
}

}  // namespace

void async_evaluate(on_backend_thread_t, limiter lim, evaluation planned,
                    std::function<void(evaluation)> done) {
  struct state {
    evaluation e;
    std::function<void(evaluation)> done;
    std::atomic<std::size_t> pending{0};
    void one_done() {
      // Each handler writes only its own outcomes; the last one to finish (acq_rel on the
      // counter orders the writes before it) completes the evaluation.
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        finish(e);
        done(std::move(e));
      }
    }
  };
  auto st = std::make_shared<state>();
  st->e = std::move(planned);
  st->done = std::move(done);
  const auto parts = split_outcomes(st->e);
  const std::size_t calls = parts.alone.size() + (parts.together.empty() ? 0 : 1);
  if (calls == 0) {
    finish(st->e);
    st->done(std::move(st->e));
    return;
  }
  st->pending.store(calls, std::memory_order_relaxed);
  if (!parts.together.empty()) {
    // On the backend's thread (or inline): the caller's completion posts once, to where it
    // belongs, instead of each part hopping through Asio's system executor first.
    lim.async_check_all(on_backend_thread, items_of(st->e, parts.together),
                        [st, which = parts.together](std::error_code ec, std::vector<decision> ds) {
                          for (std::size_t j = 0; j < which.size(); ++j) {
                            record(st->e.outcomes[which[j]], ec,
                                   j < ds.size() ? ds[j] : decision{});
                          }
                          st->one_done();
                        });
  }
  for (auto i : parts.alone) {
    const auto& o = st->e.outcomes[i];
    const auto& r = st->e.rules->rules()[o.rule_index];
    const auto* p = st->e.rules->find_valid_policy(r.policy);
    lim.async_check(on_backend_thread, o.key, *p, r.cost, [st, i](std::error_code ec, decision d) {
      record(st->e.outcomes[i], ec, d);
      st->one_done();
    });
  }
}

void async_evaluate(on_backend_thread_t, limiter lim, std::shared_ptr<const rule_set> rules,
                    const request_facts& req, std::function<void(evaluation)> done) {
  async_evaluate(on_backend_thread, std::move(lim), plan(std::move(rules), req), std::move(done));
}

evaluation evaluate(limiter& lim, std::shared_ptr<const rule_set> rules, const request_facts& req) {
  auto e = plan(std::move(rules), req);
  if (!e.rules) return e;
  const auto parts = split_outcomes(e);
  if (!parts.together.empty()) {
    std::error_code ec;
    const auto ds = lim.check_all(items_of(e, parts.together), ec);
    for (std::size_t j = 0; j < parts.together.size(); ++j) {
      record(e.outcomes[parts.together[j]], ec, j < ds.size() ? ds[j] : decision{});
    }
  }
  for (auto i : parts.alone) {
    auto& o = e.outcomes[i];
    const auto& r = e.rules->rules()[o.rule_index];
    std::error_code ec;
    const auto d = lim.check(o.key, *e.rules->find_valid_policy(r.policy), r.cost, ec);
    record(o, ec, d);
  }
  finish(e);
  return e;
}

}  // namespace sluice::http
