// The concurrency limits' metrics (metrics::slot_event), per policy: the holders last seen
// and what the steps did.
#include "metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

namespace sluice::daemon {

struct metrics::slot_families {
  explicit slot_families(prometheus::Registry& r)
      : in_flight(prometheus::BuildGauge()
                      .Name("sluice_slots_in_flight")
                      .Help("Holders of a concurrency limit's key, as its last step reported")
                      .Register(r)),
        acquired(prometheus::BuildCounter()
                     .Name("sluice_slots_acquired_total")
                     .Help("Slots acquired (POST /v1/acquire answered 200)")
                     .Register(r)),
        refused(prometheus::BuildCounter()
                    .Name("sluice_slots_refused_total")
                    .Help("Acquires refused: the limit was reached (429)")
                    .Register(r)),
        released(prometheus::BuildCounter()
                     .Name("sluice_slots_released_total")
                     .Help("Slots released while held (POST /v1/release answered 200)")
                     .Register(r)),
        renew_failed(prometheus::BuildCounter()
                         .Name("sluice_slots_renew_failures_total")
                         .Help("Renewals of a slot no longer held: its lease had ended (404)")
                         .Register(r)) {}

  struct series {
    prometheus::Gauge* in_flight;
    prometheus::Counter* acquired;
    prometheus::Counter* refused;
    prometheus::Counter* released;
    prometheus::Counter* renew_failed;
  };
  // Policy names come from the config, never from a request: the series stay bounded.
  series& of(std::string_view policy) {
    std::lock_guard lock(mu);
    auto it = by_policy.find(policy);
    if (it == by_policy.end()) {
      const prometheus::Labels l{{"policy", std::string(policy)}};
      it = by_policy
               .emplace(std::string(policy),
                        series{&in_flight.Add(l), &acquired.Add(l), &refused.Add(l),
                               &released.Add(l), &renew_failed.Add(l)})
               .first;
    }
    return it->second;
  }

  prometheus::Family<prometheus::Gauge>& in_flight;
  prometheus::Family<prometheus::Counter>& acquired;
  prometheus::Family<prometheus::Counter>& refused;
  prometheus::Family<prometheus::Counter>& released;
  prometheus::Family<prometheus::Counter>& renew_failed;
  std::mutex mu;
  std::map<std::string, series, std::less<>> by_policy;
};

void metrics::slot_event(std::string_view policy, std::string_view event, std::uint64_t in_flight) {
  std::call_once(slots_once_, [this] { slots_ = std::make_shared<slot_families>(*registry_); });
  auto& s = slots_->of(policy);
  s.in_flight->Set(static_cast<double>(in_flight));
  if (event == "acquired") s.acquired->Increment();
  if (event == "refused") s.refused->Increment();
  if (event == "released") s.released->Increment();
  if (event == "renew_failed") s.renew_failed->Increment();
}

}  // namespace sluice::daemon
