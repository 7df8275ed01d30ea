// make_redis_cluster_backend: a sluice::backend over cluster_client, with the I/O thread
// and the blocking call shaped exactly like the standalone Redis backend's.
#include <sluice/error.hpp>

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "algorithm/token_bucket.hpp"
#include "core/await_decision.hpp"
#include "core/key_groups.hpp"
#include "core/log.hpp"
#include "redis/cluster/cluster_client.hpp"
#include "redis/cluster/key_slot.hpp"
#include "redis/engine/engine_backend.hpp"
#include "redis/engine/io_runner.hpp"
#include "redis/engine/options.hpp"
#include "redis/tls.hpp"
#include "redis/topology_backends.hpp"

namespace sluice {
namespace {
namespace asio = boost::asio;

// A multi-key decision on a cluster: its items grouped by slot (in order of first
// appearance). One group is one atomic script. Several are decided one after another;
// when a group denies or fails, the groups before it (which spent) get their tokens back
// by the refund script, and the groups after it are not asked.
struct cross_slot_call {
  struct group {
    std::uint16_t slot;
    std::vector<std::size_t> items;
  };
  std::shared_ptr<redis::cluster::cluster_client> client;
  std::vector<std::string> keys;
  std::vector<detail::limit_params> params;
  std::vector<policy> policies;
  std::vector<std::uint64_t> costs;
  std::vector<group> groups;
  std::size_t next = 0;
  std::vector<decision> out;
  decide_all_handler done;

  template <class T>
  std::vector<T> pick(const std::vector<T>& all, const group& g) const {
    std::vector<T> v;
    v.reserve(g.items.size());
    for (auto i : g.items) v.push_back(all[i]);
    return v;
  }
};

// Gives back what groups [0, upto) spent and makes their decisions say so.
void refund_before(const std::shared_ptr<cross_slot_call>& c, std::size_t upto) {
  for (std::size_t g = 0; g < upto; ++g) {
    const auto& grp = c->groups[g];
    std::vector<std::uint64_t> caps;
    for (auto i : grp.items) caps.push_back(limit_of(c->policies[i]));
    // Fire and forget: the answer does not wait; a failed refund is counted and leaves
    // those tokens spent (an under-admission, never an over-admission).
    c->client->submit_multi(redis::cluster::multi_kind::refund, c->pick(c->keys, grp),
                            c->pick(c->params, grp), std::move(caps),
                            [](std::error_code, std::vector<decision>) {});
    // Report each item's bucket as it was before the call: what the last item on its key
    // left, plus everything this call spent on that key.
    const auto keys = detail::group_keys(
        grp.items.size(), [&](std::size_t k) -> std::string_view { return c->keys[grp.items[k]]; });
    std::vector<std::uint64_t> spent_on(keys.first.size(), 0);
    std::vector<std::size_t> last_on(keys.first.size(), 0);
    for (std::size_t k = 0; k < grp.items.size(); ++k) {
      spent_on[keys.group[k]] += c->costs[grp.items[k]];
      last_on[keys.group[k]] = grp.items[k];
    }
    for (std::size_t k = 0; k < grp.items.size(); ++k) {
      const auto i = grp.items[k];
      const std::uint64_t spent = spent_on[keys.group[k]];
      auto& d = c->out[i];
      const auto& p = c->params[i];
      const auto after = c->out[last_on[keys.group[k]]];
      d.remaining = std::min(limit_of(c->policies[i]), after.remaining + spent);
      // A bucket is full again sooner by the time the refund is worth; a window's end
      // does not move.
      std::int64_t back_ms = 0;
      if (p.algo == algorithm::token_bucket) {
        back_ms = static_cast<std::int64_t>(spent) * detail::micro_tokens_per_token / p.b;
      } else if (p.algo == algorithm::gcra) {
        back_ms = static_cast<std::int64_t>(spent) * p.a / 1000;
      }
      d.reset_after = std::max(std::chrono::milliseconds{0},
                               after.reset_after - std::chrono::milliseconds{back_ms});
    }
  }
}

void next_group(std::shared_ptr<cross_slot_call> c) {
  if (c->next == c->groups.size()) {
    auto done = std::move(c->done);
    done({}, std::move(c->out));
    return;
  }
  const auto& grp = c->groups[c->next];
  std::vector<std::uint64_t> caps;
  for (auto i : grp.items) caps.push_back(limit_of(c->policies[i]));
  auto client = c->client;
  client->submit_multi(
      redis::cluster::multi_kind::decide, c->pick(c->keys, grp), c->pick(c->params, grp),
      std::move(caps), [c](std::error_code ec, std::vector<decision> ds) mutable {
        const auto& g = c->groups[c->next];
        if (ec || ds.size() != g.items.size()) {
          refund_before(c, c->next);
          auto done = std::move(c->done);
          done(ec ? ec : make_error_code(errc::backend_protocol_error), {});
          return;
        }
        for (std::size_t j = 0; j < ds.size(); ++j) c->out[g.items[j]] = ds[j];
        if (!all_allowed(ds)) {
          refund_before(c, c->next);
          // Not asked: nothing to report but what `open` would (allowed, nothing spent).
          for (std::size_t later = c->next + 1; later < c->groups.size(); ++later) {
            for (auto i : c->groups[later].items) {
              decision d;
              d.allowed = true;
              d.limit = limit_of(c->policies[i]);
              d.remaining = limit_of(c->policies[i]) - c->costs[i];
              c->out[i] = d;
            }
          }
          auto done = std::move(c->done);
          done({}, std::move(c->out));
          return;
        }
        ++c->next;
        next_group(std::move(c));
      });
}

class cluster_backend final : public redis::engine_backend<> {
 public:
  cluster_backend(const redis_options& o, const redis_cluster_url& u)
      : engine_backend(o, redis::io_runner::own("sluice cluster")),
        // The TLS files are loaded here, before the thread starts: a bad one throws.
        client_(std::make_shared<redis::cluster::cluster_client>(runner().io(), o, u,
                                                                 redis::make_tls_config(u.tls))) {
    client_->start();
    runner().start();
  }

  ~cluster_backend() override {
    client_->stop();
    runner().finish();
  }

  std::error_code decide_all(std::span<const check_item> items,
                             std::vector<decision>& out) override {
    out.clear();
    if (items.empty()) return {};
    if (on_io_thread()) return make_error_code(errc::backend_unavailable);
    // A cross-slot call takes a round trip per slot group: wait for all of them.
    return detail::await_decisions(
        [&](decide_all_handler done) { async_decide_all(items, std::move(done)); },
        wait_limit() * static_cast<std::int64_t>(items.size()), out);
  }

  void async_decide_all(std::span<const check_item> items, decide_all_handler handler) override {
    if (items.empty()) {
      handler({}, {});
      return;
    }
    if (items.size() == 1) {
      async_decide(items[0].key, items[0].policy, items[0].cost,
                   [handler = std::move(handler)](std::error_code ec, decision d) {
                     if (ec) return handler(ec, {});
                     handler(ec, std::vector<decision>{d});
                   });
      return;
    }
    auto c = std::make_shared<cross_slot_call>();
    c->client = client_;
    c->done = std::move(handler);
    std::unordered_map<std::uint16_t, std::size_t> group_of_slot;
    for (const auto& it : items) {
      std::string key = full_key(it.key);
      const std::uint16_t slot = redis::cluster::key_slot(key);
      const auto [at, fresh] = group_of_slot.try_emplace(slot, c->groups.size());
      const std::size_t g = at->second;
      if (fresh) c->groups.push_back({slot, {}});
      c->groups[g].items.push_back(c->keys.size());
      c->keys.push_back(std::move(key));
      c->params.push_back(detail::to_limit_params(it.policy, it.cost));
      c->policies.push_back(it.policy);
      c->costs.push_back(it.cost);
    }
    c->out.resize(items.size());
    if (c->groups.size() > 1) client_->note_cross_slot();
    next_group(std::move(c));
  }

  backend_stats stats() const noexcept override {
    const auto c = client_->stats();
    backend_stats s;
    s.up = c.refreshes > 0;
    s.noscript = c.noscript;
    s.other_script_calls = c.other_script_calls;
    s.moved = c.moved;
    s.ask = c.ask;
    s.slot_map_refreshes = c.refreshes;
    s.slot_map_refresh_failures = c.refresh_failures;
    s.cross_slot = c.cross_slot;
    s.refunds = c.refunds;
    s.refund_failures = c.refund_failures;
    s.script_calls = c.script_calls;
    s.batched_decisions = c.batched_decisions;
    return s;
  }

 private:
  void submit_script(redis::script_request request, redis::reply_handler handler) override {
    client_->submit_script(std::move(request), std::move(handler));
  }

  void submit_slot(std::string full_key, const slot_request& request,
                   slot_handler handler) override {
    client_->submit_slot(std::move(full_key), request, std::move(handler));
  }

  void submit(std::string full_key, const detail::limit_params& params, std::uint64_t limit,
              decide_handler handler) override {
    client_->submit(std::move(full_key), params, limit, std::move(handler));
  }

  std::shared_ptr<redis::cluster::cluster_client> client_;
};

}  // namespace

std::shared_ptr<backend> make_redis_cluster_backend(redis_options options) {
  std::string why;
  const auto url = parse_redis_cluster_url(options.url, &why);
  if (!url) throw std::invalid_argument("invalid Redis Cluster URL: " + why);
  redis::validate_options(options, redis::topology::cluster);
  return std::make_shared<cluster_backend>(options, *url);
}

}  // namespace sluice
