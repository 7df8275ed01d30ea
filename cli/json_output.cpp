#include "json_output.hpp"

#include <nlohmann/json.hpp>

namespace sluice::cli {

std::string to_json_line(const decision& d) {
  // nlohmann::ordered_json keeps the documented field order.
  nlohmann::ordered_json j;
  j["allowed"] = d.allowed;
  j["limit"] = d.limit;
  j["remaining"] = d.remaining;
  j["retry_after_ms"] = d.retry_after.count();
  j["reset_after_ms"] = d.reset_after.count();
  j["degraded"] = d.degraded;
  if (d.degraded) j["backend_error"] = d.backend_error.message();
  return j.dump();
}

}  // namespace sluice::cli
