#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include <string>

namespace sluice {
namespace {

class category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "sluice"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::empty_key:
        return "key is empty";
      case errc::key_too_long:
        return "key is longer than " + std::to_string(max_key_size) + " bytes";
      case errc::invalid_cost:
        return "cost must be at least 1";
      case errc::cost_exceeds_capacity:
        return "cost exceeds the policy's capacity (or limit)";
      case errc::invalid_capacity:
        return "capacity must be 1..1000000000";
      case errc::invalid_refill_rate:
        return "refill_per_second must be a finite number in 0.001..1e9";
      case errc::unsupported_operation:
        return "this backend does not support key operations";
      case errc::invalid_duration:
        return "a block lasts 1 ms..366 days";
      case errc::invalid_lease_ttl:
        return "lease_ttl must be 0 ms..1 hour";
      case errc::invalid_slot_id:
        return "a slot id is 32 hex digits";
      case errc::invalid_gcra_rate:
        return "gcra: refill_per_second must be at most 1e6, and capacity / refill_per_second "
               "at most 1e9 seconds";
      case errc::unsupported_algorithm:
        return "algorithm is not supported by this backend";
      case errc::invalid_limit:
        return "limit must be 1..1000000000 (sliding_window: 1..10000; sliding_window_counter: "
               "limit x window_ms at most 4e15)";
      case errc::invalid_window:
        return "window must be 1 ms..366 days";
      case errc::mismatched_parameters:
        return "token_bucket and gcra take capacity and refill_per_second; sliding_window, "
               "sliding_window_counter and fixed_window take limit and window";
      case errc::backend_timeout:
        return "backend did not answer within the timeout";
      case errc::backend_unavailable:
        return "backend is unavailable";
      case errc::backend_protocol_error:
        return "backend sent an unexpected reply";
      case errc::backend_script_error:
        return "backend script failed";
      case errc::backend_overloaded:
        return "too many requests in flight to the backend";
      case errc::backend_shutting_down:
        return "backend is shutting down";
    }
    return "unknown sluice error " + std::to_string(ev);
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category_impl instance;
  return instance;
}

bool is_invalid_input(std::error_code ec) noexcept {
  return ec.category() == error_category() && ec.value() > 0 && ec.value() < 100;
}

bool is_backend_error(std::error_code ec) noexcept {
  return ec.category() == error_category() && ec.value() >= 100;
}

}  // namespace sluice
