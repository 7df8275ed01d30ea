// The default multi-key decision of sluice::backend, for backends without an atomic one:
// item by item, so it is not all-or-nothing (documented in backend.hpp).
#include <sluice/backend.hpp>
#include <sluice/error.hpp>

#include <memory>
#include <string>

namespace sluice {
namespace {

struct owned_item {
  std::string key;
  policy p;
  std::uint64_t cost;
};

struct chain {
  std::vector<owned_item> items;
  std::vector<decision> out;
  decide_all_handler done;
};

// One item at a time, so the order of spending is the items' order, as with decide_all.
void next(backend& b, std::shared_ptr<chain> c) {
  const std::size_t i = c->out.size();
  if (i == c->items.size()) {
    auto done = std::move(c->done);
    done({}, std::move(c->out));
    return;
  }
  const auto& it = c->items[i];
  b.async_decide(it.key, it.p, it.cost, [&b, c](std::error_code ec, decision d) mutable {
    if (ec) {
      auto done = std::move(c->done);
      done(ec, {});
      return;
    }
    c->out.push_back(d);
    next(b, std::move(c));
  });
}

}  // namespace

std::error_code backend::operate(std::string_view, const policy&, key_operation, std::uint64_t,
                                 decision&) {
  return errc::unsupported_operation;
}

void backend::async_operate(std::string_view key, const policy& p, key_operation op,
                            std::uint64_t amount, decide_handler handler) {
  decision d;
  const auto ec = operate(key, p, op, amount, d);
  handler(ec, d);
}

std::error_code backend::decide_all(std::span<const check_item> items, std::vector<decision>& out) {
  out.clear();
  out.reserve(items.size());
  for (const auto& it : items) {
    decision d;
    if (auto ec = decide(it.key, it.policy, it.cost, d)) {
      out.clear();
      return ec;
    }
    out.push_back(d);
  }
  return {};
}

void backend::async_decide_all(std::span<const check_item> items, decide_all_handler handler) {
  auto c = std::make_shared<chain>();
  c->items.reserve(items.size());
  for (const auto& it : items) c->items.push_back({std::string(it.key), it.policy, it.cost});
  c->out.reserve(items.size());
  c->done = std::move(handler);
  // The caller keeps the backend alive until the handler ran (the limiter holds it).
  next(*this, std::move(c));
}

}  // namespace sluice

namespace sluice {

void backend::async_lease(std::string_view, const policy&, const lease_request&,
                          lease_handler handler) {
  handler(make_error_code(errc::unsupported_operation), {});
}

void backend::async_lease_return(std::string_view, const policy&, std::uint64_t, std::int64_t,
                                 decide_handler handler) {
  handler(make_error_code(errc::unsupported_operation), {});
}

bool backend::slot_now(std::string_view, const slot_request&, std::error_code&, slot_reply&) {
  return false;
}

void backend::async_slot(std::string_view, const slot_request&, slot_handler handler) {
  handler(make_error_code(errc::unsupported_operation), {});
}

}  // namespace sluice
