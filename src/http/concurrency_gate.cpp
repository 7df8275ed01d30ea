#include <sluice/http/concurrency_gate.hpp>

#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/system_executor.hpp>

namespace sluice::http {
namespace {

// The refusal of `rule`'s slot `s`: the deny status, Retry-After (whole seconds, at least 1:
// "0" would invite a retry loop) and a problem+json body naming the rule.
rate_limit_response refusal(const std::string& rule, std::uint64_t limit, const slot& s,
                            unsigned status) {
  const auto wait = std::max<std::int64_t>(1, ceil_seconds(s.retry_after()).count());
  problem p;
  p.title = status == 429 ? "Too Many Requests" : "Service Unavailable";
  p.status = status;
  p.detail = "Too many requests in flight for rule \"" + rule + "\" (at most " +
             std::to_string(limit) + "); retry in " + std::to_string(wait) +
             (wait == 1 ? " second." : " seconds.");
  p.retry_after = static_cast<std::uint64_t>(wait);
  rate_limit_response r;
  r.allowed = false;
  r.status = status;
  r.headers.push_back({"Retry-After", std::to_string(wait)});
  r.body = to_json(p);
  return r;
}

}  // namespace

void gate_pass::release() noexcept {
  for (auto& s : slots_) s.release();
  slots_.clear();
}

namespace detail {

// One request's walk through its plan: a slot per step, one step at a time, in order (so
// two requests waiting on different rules never hold what the other waits for: every
// request takes the slots in the same order). Lives in a shared_ptr held by the step in
// flight; `done` is called once.
struct gate_walk : std::enable_shared_from_this<gate_walk> {
  gate_walk(limiter l, gate_plan p, boost::asio::any_io_executor ex,
            std::function<void(std::error_code, gate_pass)> d)
      : lim(std::move(l)), plan(std::move(p)), wait_on(std::move(ex)), done(std::move(d)) {}

  limiter lim;
  gate_plan plan;
  boost::asio::any_io_executor wait_on;
  std::function<void(std::error_code, gate_pass)> done;
  gate_pass pass;
  std::size_t next = 0;

  // Asks for the next step's slot; the answer continues the walk in took(). On the memory
  // backend it comes inline (a recursion one level per rule: rules are few).
  void step() noexcept {
    if (next == plan.steps.size()) return finish({});
    const auto& s = plan.steps[next];
    try {
      auto answer = [self = shared_from_this()](std::error_code ec, slot got) {
        self->took(ec, std::move(got));
      };
      if (s.max_wait > std::chrono::milliseconds{0}) {
        // Its timers and its completion on `wait_on`: async_acquire has no form that
        // completes on the backend's thread.
        lim.async_acquire(s.key, s.policy, s.max_wait,
                          boost::asio::bind_executor(wait_on, std::move(answer)));
      } else {
        lim.async_try_acquire(on_backend_thread, s.key, s.policy, std::move(answer));
      }
    } catch (...) {
      // No memory: let the request through with what it holds, as `open` would.
      finish({});
    }
  }

  void took(std::error_code ec, slot got) noexcept {
    const auto& s = plan.steps[next];
    try {
      if (ec == std::errc::operation_canceled) {
        // The limiter is being destroyed while this waited: no slot to give.
        pass.release();
        pass.response_ = refusal(s.rule, s.policy.limit, got, plan.deny_status);
        return finish(ec);
      }
      if (!ec) {  // ec: a key over max_key_size: not limited, as a rate rule skips it
        pass.degraded_ = pass.degraded_ || got.degraded();
        if (!got) {
          pass.release();
          pass.response_ = refusal(s.rule, s.policy.limit, got, plan.deny_status);
          return finish({});
        }
        pass.slots_.push_back(std::move(got));
      }
    } catch (...) {
      return finish({});  // no memory: as in step()
    }
    ++next;
    step();
  }

  void finish(std::error_code ec) noexcept {
    auto d = std::move(done);
    if (!d) return;  // called already
    try {
      d(ec, std::move(pass));
    } catch (...) {
      // A caller's `done` that throws has nowhere to go: ours never do.
    }
  }
};

gate_plan plan_concurrency(const rule_set& rules, const request_facts& req,
                           unsigned deny_status) noexcept {
  gate_plan plan;
  // Never "admit" by mistake with a status that is no refusal.
  plan.deny_status = (deny_status < 400 || deny_status > 599) ? 503 : deny_status;
  if (rules.concurrency_policies().empty()) return plan;  // no work for rate-only sets
  try {
    for (auto i : rules.matching(req)) {
      const auto& rule = rules.rules()[i];
      const auto* p = rules.find_concurrency_policy(rule.policy);
      if (p == nullptr) continue;  // a rate rule: evaluate()'s
      const auto key = rule.key.derive(req, rules.options());
      if (!key) continue;
      plan.steps.push_back({rule.name, "@gate:" + rule.name + ":" + *key, *p, rule.max_wait});
    }
  } catch (...) {
    // No memory: let the request through with the steps planned so far, as `open` would.
  }
  return plan;
}

void walk_concurrency(limiter lim, gate_plan plan, boost::asio::any_io_executor wait_on,
                      std::function<void(std::error_code, gate_pass)> done) noexcept {
  std::shared_ptr<gate_walk> walk;
  try {
    walk = std::make_shared<gate_walk>(std::move(lim), std::move(plan), std::move(wait_on),
                                       std::move(done));
  } catch (...) {
    // No memory for the walk: let the request through, as `open` would. (`done` may be
    // moved from already; a std::function left empty is not called.)
    if (done) done({}, gate_pass{});
    return;
  }
  walk->step();
}

// The blocking forms: the walk, waited for. The answer may come on another thread (the
// backend's, a wait timer's), which may still hold the mutex when this returns: shared.
gate_pass wait_for(limiter lim, gate_plan plan) {
  if (plan.steps.empty()) return {};
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    gate_pass pass;
  };
  auto w = std::make_shared<waiter>();
  // Wait timers run on Asio's system executor (its own threads), as limiter::acquire's.
  walk_concurrency(std::move(lim), std::move(plan),
                   boost::asio::any_io_executor(boost::asio::system_executor()),
                   [w](std::error_code, gate_pass p) {
                     std::lock_guard lock(w->mu);
                     w->pass = std::move(p);
                     w->done = true;
                     w->cv.notify_one();
                   });
  std::unique_lock lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  return std::move(w->pass);
}

}  // namespace detail

concurrency_gate::concurrency_gate(limiter lim, std::vector<concurrency_rule> rules,
                                   key_options options, unsigned deny_status)
    : lim_(std::move(lim)),
      rules_(std::move(rules)),
      options_(std::move(options)),
      deny_status_(deny_status) {
  if (deny_status_ < 400 || deny_status_ > 599)
    throw std::invalid_argument("concurrency_gate: deny_status must be 400..599");
  std::set<std::string, std::less<>> names;
  for (const auto& r : rules_) {
    if (!is_valid_name(r.name))
      throw std::invalid_argument("concurrency rule \"" + r.name +
                                  "\": names are 1..64 characters of A-Z a-z 0-9 _ . -");
    if (!names.insert(r.name).second)
      throw std::invalid_argument("duplicate concurrency rule name \"" + r.name + "\"");
    if (auto ec = validate(r.policy))
      throw std::invalid_argument("concurrency rule \"" + r.name + "\": " + ec.message());
    if (r.max_wait < std::chrono::milliseconds{0} || r.max_wait > max_gate_wait)
      throw std::invalid_argument("concurrency rule \"" + r.name + "\": max_wait must be 0.." +
                                  std::to_string(max_gate_wait.count()) + " ms, not " +
                                  std::to_string(r.max_wait.count()));
  }
}

detail::gate_plan concurrency_gate::plan(const request_facts& req) const noexcept {
  detail::gate_plan plan;
  plan.deny_status = deny_status_;
  try {
    for (const auto& rule : rules_) {
      if (!rule.match.matches(req)) continue;
      const auto key = rule.key.derive(req, options_);
      if (!key) continue;
      plan.steps.push_back(
          {rule.name, "@gate:" + rule.name + ":" + *key, rule.policy, rule.max_wait});
    }
  } catch (...) {
    // No memory: let the request through with the steps planned so far, as `open` would.
  }
  return plan;
}

gate_pass concurrency_gate::enter(const request_facts& req) const {
  return detail::wait_for(lim_, plan(req));
}

gate_pass enter_concurrency(limiter& lim, const rule_set& rules, const request_facts& req,
                            unsigned deny_status) {
  return detail::wait_for(lim, detail::plan_concurrency(rules, req, deny_status));
}

}  // namespace sluice::http
