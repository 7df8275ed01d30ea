// Redis replies as sluice reads them: the RESP reader fed in chunks, then every complete
// reply through each interpretation that needs no socket (the token-bucket scripts'
// decisions, MOVED/ASK, CLUSTER SLOTS) and on into the HTTP headers and problem body a
// decision becomes. A server (or anything between) may answer anything; none of it may
// crash, overflow or produce an impossible decision.
//
// Input: four bytes of chunk sizes (cycled; the stream is fed in pieces that large), one
// byte choosing the policy's capacity, then the bytes the server sends.
#include <sluice/http/headers.hpp>
#include <sluice/policy.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "redis/cluster/redirect.hpp"
#include "redis/cluster/slot_map.hpp"
#include "redis/decide_command.hpp"
#include "redis/reply_action.hpp"
#include "redis/resp.hpp"

namespace {

using namespace sluice;
using redis::reply_ptr;
using redis::reply_reader;

using detail::longest_wait_ms;

// Every reply the reader yields for `stream` fed in pieces of `chunks` bytes, and how it
// ended (incomplete or protocol_error).
struct parsed {
  std::vector<reply_ptr> replies;
  reply_reader::status end = reply_reader::status::incomplete;
};

parsed read_all(std::string_view stream, const std::uint8_t* chunks, std::size_t nchunks) {
  parsed out;
  reply_reader reader;
  std::size_t pos = 0, k = 0;
  while (pos < stream.size() && out.end != reply_reader::status::protocol_error) {
    const std::size_t n = nchunks ? std::max<std::size_t>(1, chunks[k++ % nchunks]) : stream.size();
    const auto piece = stream.substr(pos, n);
    pos += piece.size();
    SLUICE_FUZZ_CHECK(reader.feed(piece.data(), piece.size()));
    for (;;) {
      reply_ptr r;
      out.end = reader.next(r);
      if (out.end != reply_reader::status::reply) break;
      out.replies.push_back(std::move(r));
    }
  }
  if (out.end == reply_reader::status::protocol_error)
    SLUICE_FUZZ_CHECK(!reader.error_text().empty());
  return out;
}

bool same(const redisReply& a, const redisReply& b) {
  if (a.type != b.type || a.integer != b.integer || a.elements != b.elements) return false;
  if (redis::reply_text(a) != redis::reply_text(b)) return false;
  for (std::size_t i = 0; i < a.elements; ++i) {
    if (!same(*a.element[i], *b.element[i])) return false;
  }
  return true;
}

// Array elements are never null: the sentinel and cluster code dereference them unchecked.
void check_tree(const redisReply& r, int depth) {
  SLUICE_FUZZ_CHECK(depth < 16);
  if (r.type != REDIS_REPLY_ARRAY) return;
  SLUICE_FUZZ_CHECK(r.elements == 0 || r.element);
  for (std::size_t i = 0; i < r.elements; ++i) {
    SLUICE_FUZZ_CHECK(r.element[i]);
    check_tree(*r.element[i], depth + 1);
  }
}

bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

void check_outcome(const detail::limit_outcome& o) {
  SLUICE_FUZZ_CHECK(o.remaining >= 0 && o.remaining <= std::int64_t(max_capacity));
  SLUICE_FUZZ_CHECK(o.retry_after_ms >= 0 && o.reset_after_ms >= 0);
  SLUICE_FUZZ_CHECK(!o.allowed || o.retry_after_ms == 0);
}

// What the daemon and the middleware make of a decision: headers and a problem body.
void check_decision(const decision& d, const policy& p) {
  SLUICE_FUZZ_CHECK(d.limit == p.capacity && d.remaining <= d.limit);
  SLUICE_FUZZ_CHECK(d.retry_after.count() >= 0 && d.retry_after.count() <= longest_wait_ms);
  SLUICE_FUZZ_CHECK(d.reset_after.count() >= 0 && d.reset_after.count() <= longest_wait_ms);
  for (const auto& h : http::rate_limit_headers(d, "fuzz", p)) {
    for (unsigned char c : h.value) SLUICE_FUZZ_CHECK(c >= 0x20 && c < 0x7f);
    if (h.name.starts_with("X-RateLimit") || h.name == "Retry-After")
      SLUICE_FUZZ_CHECK(is_digits(h.value));
  }
  if (!d.allowed) {
    const auto body = http::to_json(http::rate_limited_problem(d, "fuzz"));
    const auto j = nlohmann::json::parse(body, nullptr, false);
    SLUICE_FUZZ_CHECK(j.is_object() && j["status"] == 429);
  }
}

void check_slot_map(const redis::cluster::slot_map& m) {
  std::size_t covered = 0;
  const redis::cluster::slot_range* prev = nullptr;
  for (const auto& r : m.ranges()) {
    SLUICE_FUZZ_CHECK(r.first <= r.last && r.last < redis::cluster::slot_count);
    SLUICE_FUZZ_CHECK(!prev || prev->last < r.first);
    SLUICE_FUZZ_CHECK(m.range_of(r.first) == &r && m.range_of(r.last) == &r);
    SLUICE_FUZZ_CHECK(!r.master.host.empty());
    covered += r.last - r.first + 1u;
    prev = &r;
  }
  SLUICE_FUZZ_CHECK(m.covers_all_slots() == (covered == redis::cluster::slot_count));
  const auto masters = m.masters();
  SLUICE_FUZZ_CHECK(std::is_sorted(masters.begin(), masters.end()));
}

void interpret(const redisReply& r, const policy& p) {
  check_tree(r, 0);
  const auto text = redis::reply_text(r);
  SLUICE_FUZZ_CHECK(redis::is_error(r) == (r.type == REDIS_REPLY_ERROR));

  // One key (redis_backend, decision_batcher's lone checks, cluster_client).
  detail::limit_outcome o;
  const auto sr = redis::parse_decide_reply(r, o);
  if (sr == redis::script_reply::decided) check_outcome(o);
  SLUICE_FUZZ_CHECK((sr == redis::script_reply::noscript) == redis::is_error(r, "NOSCRIPT"));
  decision d;
  const auto ec = redis::to_decision(r, p.capacity, d);
  SLUICE_FUZZ_CHECK(!ec == (sr == redis::script_reply::decided));
  if (!ec) check_decision(d, p);

  // Several keys, all or nothing (check_all).
  const std::size_t n = r.type == REDIS_REPLY_ARRAY ? r.elements : 1;
  std::vector<detail::limit_outcome> os;
  if (redis::parse_decide_multi_reply(r, n, os) == redis::script_reply::decided) {
    SLUICE_FUZZ_CHECK(os.size() == n);
    for (const auto& x : os) check_outcome(x);
  }
  std::vector<decision> ds;
  const std::vector<std::uint64_t> caps(n, p.capacity);
  if (!redis::to_decisions(r, caps, ds)) {
    SLUICE_FUZZ_CHECK(ds.size() == n);
    for (const auto& x : ds) check_decision(x, p);
  }

  // A batch of independent checks: 4 values each.
  if (r.type == REDIS_REPLY_ARRAY && r.elements % 4 == 0) {
    std::vector<redis::batch_item> items;
    const auto br = redis::parse_decide_batch_reply(r, r.elements / 4, items);
    SLUICE_FUZZ_CHECK(br == redis::script_reply::decided);
    SLUICE_FUZZ_CHECK(items.size() == r.elements / 4);
    for (const auto& it : items) {
      if (it.ec) continue;
      check_outcome(it.outcome);
      check_decision(detail::to_decision(it.outcome, p.capacity), p);
    }
    SLUICE_FUZZ_CHECK(redis::parse_decide_batch_reply(r, r.elements / 4 + 1, items) !=
                      redis::script_reply::decided);
  }

  // Cluster redirections (any text: the parser must be total).
  if (const auto rd = redis::cluster::parse_redirect(text)) {
    SLUICE_FUZZ_CHECK(rd->slot < redis::cluster::slot_count && rd->target.port != 0);
    SLUICE_FUZZ_CHECK(
        text.starts_with(rd->type == redis::cluster::redirect::kind::moved ? "MOVED " : "ASK "));
  }

  // What a script call does with the reply agrees with the parsers: a redirection only
  // from an error that parses as one (the same one), NOSCRIPT and the rest only from errors,
  // and every reply that is not an error is a result to decode.
  const auto action = redis::classify_reply(r);
  using kind = redis::reply_action::kind;
  if (r.type != REDIS_REPLY_ERROR) {
    SLUICE_FUZZ_CHECK(action.what == kind::done);
  } else {
    const auto rd = redis::cluster::parse_redirect(text);
    SLUICE_FUZZ_CHECK((action.what == kind::moved || action.what == kind::ask) == rd.has_value());
    if (rd) {
      SLUICE_FUZZ_CHECK(action.redirect.slot == rd->slot && action.redirect.target == rd->target);
    }
    SLUICE_FUZZ_CHECK(action.what != kind::done);
    if (action.what == kind::resend_as_eval) SLUICE_FUZZ_CHECK(text.starts_with("NOSCRIPT"));
  }

  std::string why;
  if (const auto m = redis::cluster::parse_cluster_slots(r, "10.0.0.9", &why)) {
    check_slot_map(*m);
  } else {
    SLUICE_FUZZ_CHECK(!why.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  static constexpr std::uint64_t capacities[] = {1, 10, 1000, max_capacity};
  policy p;
  p.capacity = capacities[data[4] % 4];
  p.refill_per_second = 0.5;
  const auto stream = sluice::fuzz::as_text(data + 5, size - 5);

  const auto whole = read_all(stream, nullptr, 0);
  const auto pieces = read_all(stream, data, 4);
  // However the bytes arrive, they read the same.
  SLUICE_FUZZ_CHECK(whole.end == pieces.end);
  SLUICE_FUZZ_CHECK(whole.replies.size() == pieces.replies.size());
  for (std::size_t i = 0; i < whole.replies.size(); ++i) {
    SLUICE_FUZZ_CHECK(same(*whole.replies[i], *pieces.replies[i]));
    interpret(*whole.replies[i], p);
  }
  return 0;
}
