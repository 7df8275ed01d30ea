// sluice::daemon::parse_check_request, the SAX reader of POST /v1/check bodies, against
// nlohmann::json's DOM parser: both must agree on what is JSON, and the SAX reader must
// accept exactly the objects of string key, string policy and optional integer cost.
#include <nlohmann/json.hpp>

#include "check_request.hpp"
#include "fuzz_check.hpp"

namespace {

using json = nlohmann::json;

// What the body is to the DOM parser, as far as a check request goes.
bool is_check_shape(const json& j) {
  if (!j.is_object()) return false;
  for (const auto& [name, value] : j.items()) {
    if (name == "key" || name == "policy") {
      if (!value.is_string()) return false;
    } else if (name == "cost") {
      if (!value.is_number_integer()) return false;
    } else {
      return false;
    }
  }
  return j.contains("key") && j.contains("policy");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto body = sluice::fuzz::as_text(data, size);
  sluice::daemon::check_request out;
  const auto err = sluice::daemon::parse_check_request(body, out);
  const json dom = json::parse(body, nullptr, /*allow_exceptions=*/false);

  // Both read the same grammar.
  SLUICE_FUZZ_CHECK((err && err->code == "malformed_json") == dom.is_discarded());
  if (err) {
    SLUICE_FUZZ_CHECK(err->code == "malformed_json" || err->code == "invalid_request");
    SLUICE_FUZZ_CHECK(!err->detail.empty());
    // A body of the right shape is refused only for a repeated member, which the DOM
    // (last one wins) cannot see.
    if (!dom.is_discarded() && is_check_shape(dom)) {
      SLUICE_FUZZ_CHECK(err->detail.find("more than once") != std::string::npos);
    }
    return 0;
  }
  SLUICE_FUZZ_CHECK(is_check_shape(dom));
  // The strings reach the limiter key and error details: the JSON reader guarantees UTF-8.
  SLUICE_FUZZ_CHECK(sluice::fuzz::is_utf8(out.key) && sluice::fuzz::is_utf8(out.policy));
  SLUICE_FUZZ_CHECK(out.key == dom["key"].get<std::string>());
  SLUICE_FUZZ_CHECK(out.policy == dom["policy"].get<std::string>());
  if (!dom.contains("cost")) {
    SLUICE_FUZZ_CHECK(out.cost == 1);
  } else if (dom["cost"].is_number_unsigned()) {
    SLUICE_FUZZ_CHECK(out.cost == dom["cost"].get<std::uint64_t>());
  } else {
    SLUICE_FUZZ_CHECK(out.cost == 0);  // negative: out of range for every policy
  }
  return 0;
}
