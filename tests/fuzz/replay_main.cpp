// The main of a fuzz target built without libFuzzer (the g++ presets): runs
// LLVMFuzzerTestOneInput once on every file of the directories (or files) given, so that
// ctest re-checks the seed corpus and every crash ever found on each normal test run.
// A failed invariant aborts, which fails the test; the input's name is printed first.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_check.hpp"

namespace fs = std::filesystem;

namespace {

// README files document a directory; dot files keep an empty one in git. Neither is input.
bool is_input(const fs::path& p) {
  const auto name = p.filename().string();
  return !name.empty() && name.front() != '.' && !name.starts_with("README");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  for (int a = 1; a < argc; ++a) {
    const fs::path arg = argv[a];
    std::vector<fs::path> files;
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      for (const auto& e : fs::directory_iterator(arg)) {
        if (e.is_regular_file() && is_input(e.path())) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());  // the same order on every machine
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      // A path that went missing must not pass as "nothing to replay".
      std::fprintf(stderr, "%s: no such file or directory\n", arg.c_str());
      return 2;
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read\n", f.c_str());
        return 2;
      }
      std::fprintf(stderr, "replay %s (%zu bytes)\n", f.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    }
    std::fprintf(stderr, "replayed %zu inputs from %s\n", files.size(), arg.c_str());
  }
  return 0;
}
