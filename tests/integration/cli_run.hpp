#pragma once
// Runs the built `sluice` binary (SLUICE_CLI overrides its path) for the cli_*_test.cpp
// files: its exit status, stdout as JSON lines, and stderr.
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process_child.hpp"

namespace sluice::test {

struct cli_result {
  int status = -1;
  std::vector<nlohmann::json> lines;  // stdout, one JSON value per line
  std::string out;                    // stdout as it was
  std::string err;
};

// `sluice ARGS...`, e.g. run_sluice({"peek", "--key", "k", ...}).
inline cli_result run_sluice(const std::vector<std::string>& args) {
  const char* env = std::getenv("SLUICE_CLI");
  std::vector<std::string> argv{env ? env : SLUICE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  process_child p(argv, "sluice");
  cli_result r;
  r.status = p.wait(std::chrono::seconds{60}).value_or(-1);
  r.out = p.stdout_text();
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) {
    r.lines.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
  }
  r.err = p.stderr_text();
  return r;
}

// The arguments as one line, for SCOPED_TRACE (long ones cut).
inline std::string shown(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (a.size() > 40 ? a.substr(0, 40) + "..." : a) + " ";
  return s;
}

}  // namespace sluice::test
