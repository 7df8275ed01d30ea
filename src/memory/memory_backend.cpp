// The memory backend: the decision math of src/algorithm on a sharded hash table.
//
// Speed (docs/BENCHMARKS.md, part d): each key is hashed once; the high bits pick the shard,
// the low bits the slot. A shard is an open-addressing table (linear probing) of one-cache-line
// slots that hold the state and, for keys up to 28 bytes, the key itself, so a lookup over a
// working set far larger than the caches costs about one memory access instead of the three
// of a node-based map. Large tables ask the kernel for transparent huge pages, which spares
// a TLB miss per lookup (expensive under virtualisation).
#include <sluice/memory_backend.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <string>
#include <unordered_map>

#include "algorithm/lease.hpp"
#include "algorithm/limit.hpp"
#include "algorithm/token_bucket.hpp"
#include "core/key_groups.hpp"
#include "core/log.hpp"
#include "memory/slot_store.hpp"

namespace sluice {
namespace {

// Hashing and comparing short keys inline (8-byte loads, overlapping at the tail) costs a
// few nanoseconds, where std::hash and memcmp cost a call and a loop each: at ten million
// decisions per second that is a fifth of the budget.
__extension__ using uint128 = unsigned __int128;

std::uint64_t load64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::uint64_t load32(const char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The high and low halves of a 64x64-bit product folded together (as in wyhash).
std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept {
  const uint128 r = static_cast<uint128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

// For a given length, the words read determine every byte, so equal hashes of different
// keys are only chance collisions; the table compares keys anyway, so none is ever merged.
std::uint64_t hash_key(std::string_view key) noexcept {
  constexpr std::uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
                          k2 = 0x8ebc6af09c88c6e3ull;
  const char* p = key.data();
  const std::size_t n = key.size();
  std::uint64_t h = k0 ^ n;
  if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) h = mix(h ^ load64(p + i), k1);
    if (i < n) h = mix(h ^ load64(p + n - 8), k2);
  } else if (n >= 4) {
    h = mix(h ^ (load32(p) | (load32(p + n - 4) << 32)), k2);
  } else if (n > 0) {
    const auto b = [&](std::size_t i) {
      return static_cast<std::uint64_t>(static_cast<unsigned char>(p[i]));
    };
    h = mix(h ^ (b(0) | (b(n / 2) << 8) | (b(n - 1) << 16)), k2);
  }
  return mix(h, k1);
}

// a == b for n bytes each.
bool same_bytes(const char* a, const char* b, std::size_t n) noexcept {
  if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      if (load64(a + i) != load64(b + i)) return false;
    }
    return i == n || load64(a + n - 8) == load64(b + n - 8);
  }
  if (n >= 4) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// One key's state; exactly one cache line. The state's words mean what limit_state's do
// for the slot's algorithm, except: sliding_window_counter keeps both counts in `y` (each
// at most max_capacity < 2^32: current in the low half, previous in the high half), and
// sliding_window keeps its log in a separate allocation whose pointer is in `x`.
struct alignas(64) slot {
  static constexpr std::size_t inline_key_size = 28;

  std::uint64_t hash;
  std::int64_t x;
  std::int64_t y;
  std::int64_t expires_ms;  // from then on the state decides as no state: the slot can go
  std::uint16_t key_size;   // 0: empty slot (keys are never empty; at most max_key_size)
  bool heap_key;            // key in a separate allocation, its pointer in `key`
  std::uint8_t algo;        // a sluice::algorithm
  char key[inline_key_size];

  bool used() const noexcept { return key_size != 0; }
  std::string_view key_view() const noexcept {
    if (!heap_key) return {key, key_size};
    const char* p;
    std::memcpy(&p, key, sizeof p);
    return {p, key_size};
  }
  std::vector<detail::log_entry>* log() const noexcept {
    return reinterpret_cast<std::vector<detail::log_entry>*>(x);
  }
};
static_assert(sizeof(slot) == 64);
static_assert(max_key_size <= 0xffff);

// The slot tag of a block (key_operation::block): `x` holds its end in us, whatever the
// algorithm.
constexpr std::uint8_t blocked_tag = 7;

// Frees a sliding_window slot's log; the slot then holds a token_bucket's empty state.
void release_log(slot& s) noexcept {
  if (s.algo == static_cast<std::uint8_t>(algorithm::sliding_window)) {
    delete s.log();
    s.x = 0;
    s.algo = static_cast<std::uint8_t>(algorithm::token_bucket);
  }
}

// The slot's state for a decision of algorithm `a` at now_ms: none once it expired, or
// when it was written by another algorithm (a key whose policy changed starts afresh).
std::optional<detail::limit_state> load_state(const slot& s, algorithm a, std::int64_t now_ms) {
  if (s.expires_ms <= now_ms) return std::nullopt;
  detail::limit_state st;
  if (s.algo == blocked_tag) {
    st.blocked_until_us = s.x;
    return st;
  }
  if (s.algo != static_cast<std::uint8_t>(a)) return std::nullopt;
  switch (a) {
    case algorithm::sliding_window_counter:
      st.x = s.x;
      st.y = static_cast<std::int64_t>(static_cast<std::uint64_t>(s.y) & 0xffffffffu);
      st.z = static_cast<std::int64_t>(static_cast<std::uint64_t>(s.y) >> 32);
      break;
    case algorithm::sliding_window:
      st.log = *s.log();
      break;
    default:
      st.x = s.x;
      st.y = s.y;
  }
  return st;
}

void store_state(slot& s, algorithm a, detail::limit_state&& st, std::int64_t expires_ms) {
  s.expires_ms = expires_ms;
  if (st.blocked_until_us != 0) {
    release_log(s);
    s.algo = blocked_tag;
    s.x = st.blocked_until_us;
    s.y = 0;
    return;
  }
  if (a == algorithm::sliding_window) {
    if (s.algo == static_cast<std::uint8_t>(a)) {
      *s.log() = std::move(st.log);
    } else {
      s.x = reinterpret_cast<std::int64_t>(new std::vector<detail::log_entry>(std::move(st.log)));
      s.algo = static_cast<std::uint8_t>(a);
    }
    s.y = 0;
    return;
  }
  release_log(s);
  s.algo = static_cast<std::uint8_t>(a);
  s.x = st.x;
  s.y = a == algorithm::sliding_window_counter
            ? static_cast<std::int64_t>(static_cast<std::uint64_t>(st.y) |
                                        (static_cast<std::uint64_t>(st.z) << 32))
            : st.y;
}

// When a state kept from now_ms for `reset_ms` stops mattering. gcra's reset is rounded up
// from microseconds and now_ms down, hence one more ms so that it never goes too early
// (keeping a state longer than needed changes no decision).
std::int64_t expiry(algorithm a, std::int64_t now_ms, std::int64_t reset_ms) noexcept {
  return now_ms + reset_ms + (a == algorithm::gcra ? 1 : 0);
}

// An open-addressing table with linear probing and backward-shift deletion (no tombstones).
// Not thread-safe: its shard's mutex guards it.
class bucket_table {
 public:
  bucket_table() = default;
  bucket_table(const bucket_table&) = delete;
  bucket_table& operator=(const bucket_table&) = delete;
  ~bucket_table() {
    for (std::size_t i = 0; i < capacity_; ++i) free_owned(slots_[i]);
    release(slots_, capacity_);
  }

  std::size_t size() const noexcept { return size_; }

  slot* find(std::uint64_t h, std::string_view key) noexcept {
    if (size_ == 0) return nullptr;
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (!s.used()) return nullptr;
      if (s.hash == h && s.key_size == key.size() &&
          same_bytes(s.key_view().data(), key.data(), key.size())) {
        return &s;
      }
    }
  }

  // Inserts a key known to be absent, with no state (the caller stores one).
  slot& insert(std::uint64_t h, std::string_view key) {
    if ((size_ + 1) * 4 > capacity_ * 3) grow();
    slot& s = slots_[free_index(slots_, mask_, h)];
    s.hash = h;
    s.x = 0;
    s.y = 0;
    s.expires_ms = 0;
    s.algo = static_cast<std::uint8_t>(algorithm::token_bucket);
    s.key_size = static_cast<std::uint16_t>(key.size());
    s.heap_key = key.size() > slot::inline_key_size;
    if (s.heap_key) {
      char* p = new char[key.size()];
      std::memcpy(p, key.data(), key.size());
      std::memcpy(s.key, &p, sizeof p);
    } else {
      std::memcpy(s.key, key.data(), key.size());
    }
    ++size_;
    return s;
  }

  // Removes every slot for which pred(slot) is true. O(capacity), in place: a slot that
  // backward-shift deletion moves into position i is examined again, and one moved from
  // the start of the table (a run that wraps around) was examined already, so every slot
  // is seen at least once and pred may see a kept slot twice.
  template <class Pred>
  void erase_if(Pred pred) {
    for (std::size_t i = 0; i < capacity_; ++i) {
      while (slots_[i].used() && pred(slots_[i])) {
        free_owned(slots_[i]);
        erase_at(i);
      }
    }
  }

  // Looks at up to `budget` used slots from index `from` on (wrapping around, at most one
  // lap) and removes those for which pred(slot) is true; a slot that backward-shift deletion
  // moves into a hole is looked at too. Returns where the window ended (the next cursor).
  template <class Pred>
  std::size_t erase_in_window(std::size_t from, std::size_t budget, Pred pred) {
    if (size_ == 0) return 0;
    std::size_t i = from & mask_;
    for (std::size_t passed = 0; passed < capacity_ && budget > 0; ++passed, i = (i + 1) & mask_) {
      while (budget > 0 && slots_[i].used()) {
        --budget;
        if (!pred(slots_[i])) break;
        free_owned(slots_[i]);
        erase_at(i);
      }
    }
    return i;
  }

  // Removes the used slot with the least expires_ms among up to `budget` used slots from
  // `from` on, and returns that expiry; nothing when the table is empty.
  std::optional<std::int64_t> erase_earliest_in_window(std::size_t from, std::size_t budget) {
    if (size_ == 0) return std::nullopt;
    std::size_t best = capacity_;
    std::size_t i = from & mask_;
    for (std::size_t passed = 0; passed < capacity_ && budget > 0; ++passed, i = (i + 1) & mask_) {
      if (!slots_[i].used()) continue;
      --budget;
      if (best == capacity_ || slots_[i].expires_ms < slots_[best].expires_ms) best = i;
    }
    const std::int64_t expires_ms = slots_[best].expires_ms;
    free_owned(slots_[best]);
    erase_at(best);
    return expires_ms;
  }

 private:
  static std::size_t free_index(const slot* slots, std::size_t mask, std::uint64_t h) noexcept {
    std::size_t i = h & mask;
    while (slots[i].used()) i = (i + 1) & mask;
    return i;
  }

  // Backward-shift deletion: later slots of the same probe run move up into the hole.
  void erase_at(std::size_t hole) noexcept {
    for (std::size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
      slot& s = slots_[j];
      if (!s.used()) break;
      const std::size_t home = s.hash & mask_;
      // s may move to the hole only if the hole lies on its probe path [home, j).
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        slots_[hole] = s;
        hole = j;
      }
    }
    slots_[hole].key_size = 0;
    --size_;
  }

  void grow() {
    const std::size_t new_capacity = capacity_ == 0 ? 16 : capacity_ * 2;
    slot* fresh = allocate(new_capacity);
    const std::size_t new_mask = new_capacity - 1;
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].used()) fresh[free_index(fresh, new_mask, slots_[i].hash)] = slots_[i];
    }
    release(slots_, capacity_);
    slots_ = fresh;
    capacity_ = new_capacity;
    mask_ = new_mask;
  }

  static constexpr std::size_t huge_page = std::size_t{2} << 20;

  static slot* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(slot);
    void* p = nullptr;
    if (bytes >= huge_page) {
      p = std::aligned_alloc(huge_page, bytes);
      if (p == nullptr) throw std::bad_alloc();
      // Advice only: without transparent huge pages this is a no-op.
      ::madvise(p, bytes, MADV_HUGEPAGE);
    } else {
      p = ::operator new (bytes, std::align_val_t{alignof(slot)});
    }
    std::memset(p, 0, bytes);
    return static_cast<slot*>(p);
  }

  static void release(slot* p, std::size_t n) noexcept {
    if (p == nullptr) return;
    if (n * sizeof(slot) >= huge_page) {
      std::free(p);
    } else {
      ::operator delete (p, std::align_val_t{alignof(slot)});
    }
  }

  // What a used slot owns: a long key, a sliding_window log.
  static void free_owned(slot& s) noexcept {
    if (!s.used()) return;
    if (s.heap_key) delete[] s.key_view().data();
    release_log(s);
  }

  slot* slots_ = nullptr;
  std::size_t capacity_ = 0;  // a power of two, or 0
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

// alignas keeps two shards' mutexes off one cache line.
struct alignas(64) shard {
  std::mutex mu;
  bucket_table table;
  std::int64_t next_sweep_ms = 0;  // no entry expires before this
  std::size_t cursor = 0;          // where the next bounded scan for room starts
  // Inserts that needed room since the last full sweep: a sweep (O(table)) is paid for by
  // table / scan_budget of them, so room costs O(scan_budget) per insert amortized.
  std::size_t credit = std::numeric_limits<std::size_t>::max();
};

class memory_backend final : public backend {
 public:
  static constexpr std::size_t min_shard_keys = 64;
  // Used slots one search for room looks at (and, when all are live, chooses among).
  static constexpr std::size_t scan_budget = 16;

  explicit memory_backend(memory_options o)
      : clock_(o.time_source ? std::move(o.time_source) : default_clock()),
        // The bound is on all shards together (keys_), so hashing's uneven spread cannot make
        // one shard evict far below max_keys. A shard would hold no key to evict only if
        // shards outnumbered the keys: each gets at least min_shard_keys of max_keys.
        shards_(std::clamp<std::size_t>(o.shards, 1,
                                        std::max<std::size_t>(1, o.max_keys / min_shard_keys))),
        max_keys_(std::max<std::size_t>(1, o.max_keys)),
        serve_leases_(o.serve_leases) {}

  backend_stats stats() const noexcept override {
    backend_stats st;
    st.keys = keys_.load(std::memory_order_relaxed);
    st.evicted_live = evicted_live_.load(std::memory_order_relaxed);
    return st;
  }

  std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                         decision& out) override {
    const std::int64_t now_us = clock_->now().count();
    const std::int64_t now_ms = now_us / 1000;
    const std::uint64_t h = hash_key(key);
    // The slot index uses the low bits; the shard takes the high ones, so the two stay
    // independent.
    shard& s = shards_[(h >> 32) % shards_.size()];
    std::lock_guard lock(s.mu);
    slot* found = s.table.find(h, key);

    if (p.algorithm != algorithm::token_bucket ||
        (found != nullptr && found->algo == blocked_tag)) {
      out = decide_generic(s, found, h, key, p, cost, now_us);
      return {};
    }
    // The default algorithm's path, kept free of the generic state's vector.
    const auto params = detail::to_params(p, cost);
    std::optional<detail::token_bucket_state> prev;
    if (found != nullptr && found->expires_ms > now_ms &&
        found->algo == static_cast<std::uint8_t>(algorithm::token_bucket))
      prev = detail::token_bucket_state{found->x, found->y};

    const auto o = detail::token_bucket_decide(params, prev, now_ms);
    if (o.allowed) {
      const std::int64_t full_at_ms = now_ms + o.reset_after_ms;
      slot& f = found != nullptr ? *found : insert(s, h, key, now_ms);
      release_log(f);
      f.algo = static_cast<std::uint8_t>(algorithm::token_bucket);
      f.x = o.next.level_ut;
      f.y = o.next.ts_ms;
      f.expires_ms = full_at_ms;
      s.next_sweep_ms = std::min(s.next_sweep_ms, full_at_ms);
    }
    out = detail::to_decision(o, p.capacity);
    return {};
  }

  std::error_code operate(std::string_view key, const policy& p, key_operation op,
                          std::uint64_t amount, decision& out) override {
    const std::int64_t now_us = clock_->now().count();
    with_state(key, p, now_us, [&](std::optional<detail::limit_state>& state) {
      const auto r = detail::limit_apply(detail::to_limit_params(p, op, amount), state, now_us);
      out = detail::to_decision(r.outcome, limit_of(p));
      // A block ends at its microsecond: its expiry is rounded up, never down.
      const std::int64_t expires_ms = state && state->blocked_until_us != 0
                                          ? detail::ceil_div(state->blocked_until_us, 1000)
                                          : expiry(p.algorithm, now_us / 1000, r.ttl_ms);
      return std::pair{r.write, expires_ms};
    });
    return {};
  }

  // Quota leases, when served (memory_options::serve_leases): the steps of lua/lease.lua.
  void async_lease(std::string_view key, const policy& p, const lease_request& request,
                   lease_handler handler) override {
    if (!serve_leases_) return backend::async_lease(key, p, request, std::move(handler));
    const std::int64_t now_us = clock_->now().count();
    const std::int64_t now_ms = now_us / 1000;
    const std::int64_t askers = note_asker(key, request.instance, now_ms, p.lease_ttl.count());
    lease_grant g;
    with_state(key, p, now_us, [&](std::optional<detail::limit_state>& state) {
      const auto r = detail::limit_lease(
          detail::to_limit_params(p, request.cost),
          {static_cast<std::int64_t>(request.want), askers, p.lease_ttl.count()}, state, now_us);
      g.d = detail::to_decision(r.outcome, limit_of(p));
      g.granted = static_cast<std::uint64_t>(r.granted);
      g.valid = std::chrono::milliseconds{r.valid_ms};
      g.granted_at_ms = r.at_ms;
      return std::pair{r.granted > 0, expiry(p.algorithm, now_ms, r.ttl_ms)};
    });
    handler({}, g);
  }

  void async_lease_return(std::string_view key, const policy& p, std::uint64_t units,
                          std::int64_t granted_at_ms, decide_handler handler) override {
    if (!serve_leases_)
      return backend::async_lease_return(key, p, units, granted_at_ms, std::move(handler));
    const std::int64_t now_us = clock_->now().count();
    decision d;
    with_state(key, p, now_us, [&](std::optional<detail::limit_state>& state) {
      const auto r = detail::limit_lease_return(detail::to_limit_params(p, 1),
                                                static_cast<std::int64_t>(units), granted_at_ms,
                                                state, now_us);
      d = detail::to_decision(r.outcome, limit_of(p));
      return std::pair{r.write, expiry(p.algorithm, now_us / 1000, r.ttl_ms)};
    });
    handler({}, d);
  }

  void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                    decide_handler handler) override {
    decision d;
    auto ec = decide(key, p, cost, d);
    handler(ec, d);
  }

  // Never blocks: completes inline, as async_decide.
  void async_operate(std::string_view key, const policy& p, key_operation op, std::uint64_t amount,
                     decide_handler handler) override {
    decision d;
    auto ec = operate(key, p, op, amount, d);
    handler(ec, d);
  }

  // Concurrency limits: their own table (slot_store.hpp), on this backend's clock. Never
  // blocks on I/O: completes inline, as async_decide.
  void async_slot(std::string_view key, const slot_request& request,
                  slot_handler handler) override {
    slot_reply r;
    std::error_code ec;
    slot_now(key, request, ec, r);
    handler(ec, r);
  }

  bool slot_now(std::string_view key, const slot_request& request, std::error_code& ec,
                slot_reply& out) override {
    ec = slots_.apply(key, request, clock_->now().count() / 1000, out);
    return true;
  }

  std::error_code decide_all(std::span<const check_item> items,
                             std::vector<decision>& out) override {
    out.clear();
    if (items.empty()) return {};
    if (items.size() == 1) {
      out.resize(1);
      return decide(items[0].key, items[0].policy, items[0].cost, out[0]);
    }
    const std::int64_t now_us = clock_->now().count();
    const std::int64_t now_ms = now_us / 1000;
    // Distinct keys get one state each (items on one key spend from it).
    struct key_ref {
      std::uint64_t hash;
      std::string_view key;
      std::size_t shard;
      algorithm algo;  // the first item's; the limiter refuses two on one key
    };
    const auto groups =
        detail::group_keys(items.size(), [&](std::size_t i) { return items[i].key; });
    std::vector<key_ref> keys;
    keys.reserve(groups.first.size());
    for (const auto i : groups.first) {
      const std::uint64_t h = hash_key(items[i].key);
      keys.push_back({h, items[i].key, (h >> 32) % shards_.size(), items[i].policy.algorithm});
    }
    std::vector<detail::limit_item> math(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      math[i] = {detail::to_limit_params(items[i].policy, items[i].cost), groups.group[i]};
    }
    // Every shard involved is locked, each once, in ascending order: two calls can never
    // wait for each other in a cycle, and decide() holds only one shard at a time.
    std::vector<std::size_t> order;
    order.reserve(keys.size());
    for (const auto& b : keys) order.push_back(b.shard);
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(order.size());
    for (const auto i : order) locks.emplace_back(shards_[i].mu);

    std::vector<std::optional<detail::limit_state>> prev(keys.size());
    for (std::size_t b = 0; b < keys.size(); ++b) {
      const slot* f = shards_[keys[b].shard].table.find(keys[b].hash, keys[b].key);
      if (f != nullptr) prev[b] = load_state(*f, keys[b].algo, now_ms);
    }
    auto m = detail::limit_decide_all(math, prev, now_us);
    if (m.allowed) {
      for (std::size_t b = 0; b < keys.size(); ++b) {
        if (!m.next[b]) continue;
        shard& s = shards_[keys[b].shard];
        const std::int64_t expires_ms = expiry(keys[b].algo, now_ms, m.ttl_ms[b]);
        // Re-found: an insert into the same shard may have moved slots around.
        slot* f = s.table.find(keys[b].hash, keys[b].key);
        slot& dst = f != nullptr ? *f : insert(s, keys[b].hash, keys[b].key, now_ms);
        store_state(dst, keys[b].algo, std::move(*m.next[b]), expires_ms);
        s.next_sweep_ms = std::min(s.next_sweep_ms, expires_ms);
      }
    }
    out.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      out.push_back(detail::to_decision(m.items[i], limit_of(items[i].policy)));
    }
    return {};
  }

  void async_decide_all(std::span<const check_item> items, decide_all_handler handler) override {
    std::vector<decision> ds;
    auto ec = decide_all(items, ds);
    handler(ec, std::move(ds));
  }

 private:
  // Keeps every shard together within max_keys, then the caller inserts one key. A limit
  // must not be resettable by sending many new keys, so what goes first is state that
  // decides exactly as a missing key does (a full bucket, a GCRA TAT in the past, a window
  // with nothing left in it: the slot's expiry, written from the algorithm's own reset
  // time, has passed). Bounded work: a window of scan_budget slots from the shard's cursor,
  // then a full sweep only when it might find something and enough inserts paid for it.
  // Only if none of that frees room is live state forgotten: the key of the window nearest
  // to deciding as new (the earliest expiry), since one a client just spent a token on
  // will be full again long before one that is spent out; counted and logged.
  void make_room(shard& s, std::int64_t now_ms) {
    if (keys_.load(std::memory_order_relaxed) < max_keys_) return;
    const auto expired = [now_ms](const slot& e) { return e.expires_ms <= now_ms; };
    const std::size_t before = s.table.size();
    const std::size_t from = s.cursor;
    s.cursor = s.table.erase_in_window(from, scan_budget, expired);
    keys_.fetch_sub(before - s.table.size(), std::memory_order_relaxed);
    if (s.credit < std::numeric_limits<std::size_t>::max()) ++s.credit;
    if (keys_.load(std::memory_order_relaxed) >= max_keys_ && now_ms >= s.next_sweep_ms &&
        s.credit >= s.table.size() / scan_budget) {
      s.credit = 0;
      std::int64_t next = std::numeric_limits<std::int64_t>::max();
      const std::size_t n = s.table.size();
      s.table.erase_if([&](const slot& e) {
        if (expired(e)) return true;
        next = std::min(next, e.expires_ms);
        return false;
      });
      s.next_sweep_ms = next;
      keys_.fetch_sub(n - s.table.size(), std::memory_order_relaxed);
    }
    // A loop: what went over the bound (an insert into an empty shard, which has nothing to
    // give, or two shards inserting at once) is taken back by the next insert.
    while (keys_.load(std::memory_order_relaxed) >= max_keys_) {
      const auto expires_ms = s.table.erase_earliest_in_window(from, scan_budget);
      if (!expires_ms) break;
      keys_.fetch_sub(1, std::memory_order_relaxed);
      if (*expires_ms > now_ms) evicted_live(now_ms);
    }
  }

  // Counts a live key forgotten; logs the first of a burst, then at most every 10 s.
  void evicted_live(std::int64_t now_ms) noexcept {
    const auto total = evicted_live_.fetch_add(1, std::memory_order_relaxed) + 1;
    auto next = next_log_ms_.load(std::memory_order_relaxed);
    if (now_ms < next ||
        !next_log_ms_.compare_exchange_strong(next, now_ms + 10'000, std::memory_order_relaxed))
      return;
    detail::logf(log_level::warn,
                 "memory backend: max_keys ({}) reached with every key sampled still limiting; "
                 "forgot the one nearest to full ({} live keys forgotten so far, "
                 "backend_stats::evicted_live): raise max_keys above the keys active "
                 "within one refill period",
                 max_keys_, total);
  }

  slot& insert(shard& s, std::uint64_t h, std::string_view key, std::int64_t now_ms) {
    make_room(s, now_ms);
    slot& f = s.table.insert(h, key);
    keys_.fetch_add(1, std::memory_order_relaxed);
    return f;
  }

  // Every algorithm but the token bucket, on the shard `s` (locked) where `found` is the
  // key's slot or null.
  decision decide_generic(shard& s, slot* found, std::uint64_t h, std::string_view key,
                          const policy& p, std::uint64_t cost, std::int64_t now_us) {
    const std::int64_t now_ms = now_us / 1000;
    std::optional<detail::limit_state> state;
    if (found != nullptr) state = load_state(*found, p.algorithm, now_ms);
    const auto o = detail::limit_decide(detail::to_limit_params(p, cost), state, now_us);
    if (o.allowed) {
      const std::int64_t expires_ms = expiry(p.algorithm, now_ms, o.reset_after_ms);
      slot& f = found != nullptr ? *found : insert(s, h, key, now_ms);
      store_state(f, p.algorithm, std::move(*state), expires_ms);
      s.next_sweep_ms = std::min(s.next_sweep_ms, expires_ms);
    }
    return detail::to_decision(o, limit_of(p));
  }

  // Runs `step(state)` on the key's state under its shard's lock; `step` returns whether to
  // write the state back and, if so, when it expires (ms). Written back with no state left,
  // the key is forgotten (expired now, swept with the others).
  template <class Step>
  void with_state(std::string_view key, const policy& p, std::int64_t now_us, Step step) {
    const std::int64_t now_ms = now_us / 1000;
    const std::uint64_t h = hash_key(key);
    shard& s = shards_[(h >> 32) % shards_.size()];
    std::lock_guard lock(s.mu);
    slot* found = s.table.find(h, key);
    std::optional<detail::limit_state> state;
    if (found != nullptr) state = load_state(*found, p.algorithm, now_ms);
    const auto [write, expires_ms] = step(state);
    if (write && state) {
      slot& f = found != nullptr ? *found : insert(s, h, key, now_ms);
      store_state(f, p.algorithm, std::move(*state), expires_ms);
      s.next_sweep_ms = std::min(s.next_sweep_ms, expires_ms);
    } else if (write && found != nullptr) {
      release_log(*found);
      found->expires_ms = now_ms;
    }
  }

  // Counts the distinct instances that asked for `key` within the last ttl_ms, this one
  // included (lua/lease.lua's sorted set of askers).
  std::int64_t note_asker(std::string_view key, std::string_view instance, std::int64_t now_ms,
                          std::int64_t ttl_ms) {
    std::lock_guard lock(askers_mu_);
    auto& who = askers_[std::string(key)];
    std::erase_if(who, [&](const auto& a) { return a.second < now_ms - ttl_ms; });
    auto it =
        std::find_if(who.begin(), who.end(), [&](const auto& a) { return a.first == instance; });
    if (it == who.end()) {
      who.emplace_back(std::string(instance), now_ms);
    } else {
      it->second = now_ms;
    }
    return static_cast<std::int64_t>(who.size());
  }

  std::shared_ptr<const clock> clock_;
  std::vector<shard> shards_;
  detail::slot_store slots_;
  std::size_t max_keys_;
  const bool serve_leases_;
  std::mutex askers_mu_;
  std::unordered_map<std::string, std::vector<std::pair<std::string, std::int64_t>>> askers_;
  // Keys held by all shards; written under a shard's lock, read without one (a bound off by
  // a concurrent insert or two is still a bound).
  std::atomic<std::size_t> keys_{0};
  std::atomic<std::uint64_t> evicted_live_{0};
  std::atomic<std::int64_t> next_log_ms_{std::numeric_limits<std::int64_t>::min()};
};

}  // namespace

std::shared_ptr<backend> make_memory_backend(memory_options options) {
  return std::make_shared<memory_backend>(std::move(options));
}

}  // namespace sluice
