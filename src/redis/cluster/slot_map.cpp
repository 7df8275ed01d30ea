#include "redis/cluster/slot_map.hpp"

#include <algorithm>
#include <stdexcept>

namespace sluice::redis::cluster {

std::string node_address::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

slot_map::slot_map(std::vector<slot_range> ranges) : ranges_(std::move(ranges)) {
  std::sort(ranges_.begin(), ranges_.end(),
            [](const slot_range& a, const slot_range& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    const auto& r = ranges_[i];
    if (r.first > r.last || r.last >= slot_count)
      throw std::invalid_argument("slot range out of order or beyond slot 16383");
    if (i > 0 && ranges_[i - 1].last >= r.first)
      throw std::invalid_argument("overlapping slot ranges");
  }
}

const slot_range* slot_map::range_of(std::uint16_t slot) const noexcept {
  // The first range that ends at or after `slot`; it serves the slot if it starts by then.
  const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), slot,
                                   [](const slot_range& r, std::uint16_t s) { return r.last < s; });
  if (it == ranges_.end() || it->first > slot) return nullptr;
  return &*it;
}

const node_address* slot_map::master_of(std::uint16_t slot) const noexcept {
  const slot_range* r = range_of(slot);
  return r ? &r->master : nullptr;
}

bool slot_map::covers_all_slots() const noexcept {
  unsigned next = 0;
  for (const auto& r : ranges_) {
    if (r.first != next) return false;
    next = r.last + 1u;
  }
  return next == slot_count;
}

std::vector<node_address> slot_map::masters() const {
  std::vector<node_address> out;
  for (const auto& r : ranges_) out.push_back(r.master);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<node_address> slot_map::nodes() const {
  std::vector<node_address> out;
  for (const auto& r : ranges_) {
    out.push_back(r.master);
    out.insert(out.end(), r.replicas.begin(), r.replicas.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

bool fail(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

// [host, port, id, ...] -> address; `known` is false for the unknown endpoint "?".
bool parse_node(const redisReply* e, std::string_view asked_host, node_address& out, bool& known,
                std::string* why) {
  if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 2)
    return fail(why, "a node entry is not [host, port, ...]");
  const redisReply* host = e->element[0];
  const redisReply* port = e->element[1];
  if (!host || host->type != REDIS_REPLY_STRING) return fail(why, "a node's host is not a string");
  if (!port || port->type != REDIS_REPLY_INTEGER || port->integer < 0 || port->integer > 65535)
    return fail(why, "a node's port is not an integer in 0..65535");
  const std::string_view h(host->str, host->len);
  known = h != "?";
  out.host = h.empty() ? std::string(asked_host) : std::string(h);
  out.port = static_cast<std::uint16_t>(port->integer);
  return true;
}

bool parse(const redisReply& reply, std::string_view asked_host, std::vector<slot_range>& out,
           std::string* why) {
  if (reply.type == REDIS_REPLY_ERROR)
    return fail(why, "CLUSTER SLOTS failed: " + std::string(reply.str, reply.len));
  if (reply.type != REDIS_REPLY_ARRAY) return fail(why, "CLUSTER SLOTS reply is not an array");
  for (std::size_t i = 0; i < reply.elements; ++i) {
    const redisReply* e = reply.element[i];
    if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 3)
      return fail(why, "a CLUSTER SLOTS entry is not [first, last, master, ...]");
    const redisReply* first = e->element[0];
    const redisReply* last = e->element[1];
    if (!first || !last || first->type != REDIS_REPLY_INTEGER ||
        last->type != REDIS_REPLY_INTEGER || first->integer < 0 || last->integer < first->integer ||
        last->integer >= slot_count)
      return fail(why, "a CLUSTER SLOTS entry has a bad slot range");
    slot_range r;
    r.first = static_cast<std::uint16_t>(first->integer);
    r.last = static_cast<std::uint16_t>(last->integer);
    bool known = true;
    if (!parse_node(e->element[2], asked_host, r.master, known, why)) return false;
    if (!known) continue;  // no endpoint to reach: as good as unserved
    for (std::size_t j = 3; j < e->elements; ++j) {
      node_address replica;
      bool replica_known = true;
      if (!parse_node(e->element[j], asked_host, replica, replica_known, why)) return false;
      if (replica_known) r.replicas.push_back(std::move(replica));
    }
    out.push_back(std::move(r));
  }
  return true;
}

}  // namespace

std::optional<slot_map> parse_cluster_slots(const redisReply& reply, std::string_view asked_host,
                                            std::string* why) {
  std::vector<slot_range> ranges;
  if (!parse(reply, asked_host, ranges, why)) return std::nullopt;
  try {
    return slot_map(std::move(ranges));
  } catch (const std::invalid_argument& e) {
    fail(why, std::string("CLUSTER SLOTS: ") + e.what());
    return std::nullopt;
  }
}

}  // namespace sluice::redis::cluster
