#pragma once
// Gives back the ended leases of limiters that stopped checking. A lease table returns what
// its leases did not spend when the limiter next checks a leased key; a process that stops
// checking altogether would keep those units (debited on the backend, so unused by anyone)
// until the limiter is destroyed. One thread per process sweeps the tables that hold units,
// every few tens of milliseconds, and sleeps while none does. Started by the first grant, so
// a program that never leases never has it.
#include <memory>

namespace sluice::detail {

class lease_table;

/// Has `table` swept until it holds no units (lease_table::sweep_held). Cheap when the
/// table is already watched: call it on every grant. Thread-safe; fork-safe (a child
/// process gets a sweeper of its own).
void watch_leases(const std::shared_ptr<lease_table>& table);

}  // namespace sluice::detail
