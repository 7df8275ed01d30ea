#pragma once
// The one-line JSON form of a decision that `sluice check` prints.
#include <string>

#include <sluice/decision.hpp>

namespace sluice::cli {

std::string to_json_line(const decision& d);

}  // namespace sluice::cli
