// sluice::daemon::parse_config: YAML in, a validated config or a config_error out. Any
// other exception is a bug (sluiced would die with a message the operator cannot place),
// so it is left to escape and the fuzzer reports it. An accepted config must build the
// rule set and the service exactly as sluiced does, without another word.
#include <sluice/http/rules.hpp>

#include <string>

#include "config.hpp"
#include "fuzz_check.hpp"
#include "service.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice;
  daemon::config c;
  try {
    c = daemon::parse_config(fuzz::as_text(data, size), "fuzz.yaml");
  } catch (const daemon::config_error& e) {
    SLUICE_FUZZ_CHECK(e.line() >= 0 && !e.message().empty());
    // Named by this file, or by a limits file that envoy_rls.config named (its own line).
    SLUICE_FUZZ_CHECK(std::string(e.what()).starts_with("fuzz.yaml:") ||
                      (e.field() == "envoy_rls.config" && e.line() > 0));
    return 0;
  }
  SLUICE_FUZZ_CHECK(!c.policies.empty());
  for (const auto& r : c.rules) {
    SLUICE_FUZZ_CHECK(c.policies.count(r.policy) == 1);
    SLUICE_FUZZ_CHECK(http::normalize_path(r.match.path_prefix) == r.match.path_prefix);
  }
  // The service builds the rule set from these parts; validation already passed, so a
  // throw here would mean parse_config let through what the rule set refuses.
  const http::rule_set rules(c.policies, c.rules, c.keys);
  SLUICE_FUZZ_CHECK(rules.rules().size() == c.rules.size());
  (void)daemon::redacted_url(c.backend);
  (void)c.listen();
  // The memory backend starts no thread and opens no socket: build the whole service.
  if (c.backend == "memory") daemon::service svc(std::move(c));
  return 0;
}
