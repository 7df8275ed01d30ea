#include "check_request.hpp"

#include <set>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::daemon {
namespace {

using json = nlohmann::json;

// What a member's value was, as far as the checks care.
enum class kind { missing, string, integer, other };

// nlohmann's SAX interface. Depth 1 is the top-level value's members; only those are kept.
class check_sax {
 public:
  check_sax(check_request& out, const request_members& members) : out_(out), members_(members) {}

  bool null() { return scalar(kind::other); }
  bool boolean(bool) { return scalar(kind::other); }
  // nlohmann reports non-negative integers as unsigned: this one is negative.
  bool number_integer(json::number_integer_t) {
    if (at_top_member() && current_ == slot::cost) out_.cost = 0;
    if (at_top_member() && current_ == slot::duration_ms) out_.duration_ms = 0;
    return scalar(kind::integer);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (at_top_member() && current_ == slot::cost) out_.cost = v;
    if (at_top_member() && current_ == slot::duration_ms) out_.duration_ms = v;
    return scalar(kind::integer);
  }
  bool number_float(json::number_float_t, const json::string_t&) { return scalar(kind::other); }
  bool string(json::string_t& s) {
    if (at_top_member()) {
      if (current_ == slot::key) out_.key = std::move(s);
      if (current_ == slot::policy) out_.policy = std::move(s);
    }
    return scalar(kind::string);
  }
  bool binary(json::binary_t&) { return scalar(kind::other); }

  bool start_object(std::size_t) {
    open(true);
    return true;
  }
  bool end_object() {
    close();
    return true;
  }
  bool start_array(std::size_t) {
    open(false);
    return true;
  }
  bool end_array() {
    close();
    return true;
  }

  bool key(json::string_t& name) {
    if (depth_ == 1) {
      current_ = slot_of(name);
      if (current_ == slot::unknown) {
        if (!unknown_.insert(name).second) note_repeated(name);
      } else {
        auto& seen = seen_[static_cast<int>(current_)];
        if (seen != kind::missing) note_repeated(name);
        seen = kind::other;  // until its value says what it is
      }
    } else if (!nested_.empty() && nested_.back().is_object &&
               !nested_.back().names.insert(name).second) {
      note_repeated(name);
    }
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

  std::optional<check_request_error> verdict() const {
    if (!repeated_.empty()) {
      return check_request_error{"invalid_request",
                                 "member \"" + repeated_ + "\" appears more than once"};
    }
    if (!top_is_object_)
      return check_request_error{"invalid_request", "the body must be a JSON object"};
    if (!unknown_.empty()) {
      std::string want = "key, policy";
      if (members_.cost != member_use::refused) want += ", cost";
      if (members_.duration_ms != member_use::refused) want += ", duration_ms";
      return check_request_error{
          "invalid_request", "unknown member \"" + *unknown_.begin() + "\" (want " + want + ")"};
    }
    const auto& k = seen_[static_cast<int>(slot::key)];
    if (k == kind::missing) return check_request_error{"invalid_request", "\"key\" is required"};
    if (k != kind::string)
      return check_request_error{"invalid_request", "\"key\" must be a string"};
    const auto& p = seen_[static_cast<int>(slot::policy)];
    if (p == kind::missing) return check_request_error{"invalid_request", "\"policy\" is required"};
    if (p != kind::string) {
      return check_request_error{"invalid_request", "\"policy\" must be a string"};
    }
    if (auto e = integer_member(slot::cost, members_.cost, "cost")) return e;
    return integer_member(slot::duration_ms, members_.duration_ms, "duration_ms");
  }

 private:
  enum class slot { key = 0, policy = 1, cost = 2, duration_ms = 3, unknown = 4 };
  struct container {
    bool is_object;
    std::set<std::string> names;
  };

  bool at_top_member() const { return depth_ == 1 && top_is_object_; }

  // A member this endpoint refuses is an unknown one.
  slot slot_of(const std::string& name) const {
    if (name == "key") return slot::key;
    if (name == "policy") return slot::policy;
    if (name == "cost" && members_.cost != member_use::refused) return slot::cost;
    if (name == "duration_ms" && members_.duration_ms != member_use::refused) {
      return slot::duration_ms;
    }
    return slot::unknown;
  }

  std::optional<check_request_error> integer_member(slot s, member_use use,
                                                    const char* name) const {
    const auto& k = seen_[static_cast<int>(s)];
    if (k == kind::missing && use == member_use::required) {
      return check_request_error{"invalid_request", "\"" + std::string(name) + "\" is required"};
    }
    if (k != kind::missing && k != kind::integer) {
      return check_request_error{"invalid_request",
                                 "\"" + std::string(name) + "\" must be an integer"};
    }
    return std::nullopt;
  }

  // A value that is not a container; at depth 1 it is the current member's value.
  bool scalar(kind k) {
    if (at_top_member() && current_ != slot::unknown) seen_[static_cast<int>(current_)] = k;
    return true;
  }

  void open(bool is_object) {
    if (depth_ == 0) {
      top_is_object_ = is_object;
    } else {
      scalar(kind::other);  // an object or array as a member's value, or deeper
      nested_.push_back({is_object, {}});
    }
    ++depth_;
  }

  void close() {
    --depth_;
    if (depth_ > 0) nested_.pop_back();
  }

  void note_repeated(const std::string& name) {
    if (repeated_.empty()) repeated_ = name;
  }

  check_request& out_;
  const request_members& members_;
  int depth_ = 0;
  bool top_is_object_ = false;
  slot current_ = slot::unknown;
  // key, policy, cost, duration_ms
  kind seen_[4] = {kind::missing, kind::missing, kind::missing, kind::missing};
  std::set<std::string> unknown_;  // sorted: the first by name is reported
  std::vector<container> nested_;  // the containers open below the top level
  std::string repeated_;
};

}  // namespace

std::optional<check_request_error> parse_check_request(std::string_view body, check_request& out,
                                                       const request_members& members) {
  out = check_request{};
  check_sax sax(out, members);
  if (!json::sax_parse(body, &sax)) {
    return check_request_error{"malformed_json", "the body is not valid JSON"};
  }
  return sax.verdict();
}

}  // namespace sluice::daemon
