#include "support/daemon_sluiced.hpp"

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "support/daemon_http_client.hpp"
#include "support/loopback.hpp"

namespace sluice::test {
namespace {

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

bool healthy(std::uint16_t port) {
  try {
    return http_request(port, "GET", "/healthz").status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string sluiced_path() {
  // Lets a sanitizer build of sluiced be tested with these tests.
  if (const char* p = std::getenv("SLUICE_SLUICED")) return p;
#ifdef SLUICE_SLUICED_PATH
  return SLUICE_SLUICED_PATH;
#else
  throw std::runtime_error("built without the sluiced target (SLUICE_BUILD_TOOLS=OFF)");
#endif
}

sluiced_process::sluiced_process(std::optional<std::string> yaml,
                                 std::vector<std::string> extra_args)
    : dir_(make_temp_dir("sluice-sluiced")) {
  if (yaml) {
    config_path_ = dir_ + "/sluiced.yaml";
    write_config(*yaml);
  }
  std::string why;
  // A free port can be taken between probing and binding: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    std::vector<std::string> argv{sluiced_path(), "--listen", "127.0.0.1:" + std::to_string(port_)};
    if (yaml) {
      argv.push_back("--config");
      argv.push_back(config_path_);
    }
    argv.insert(argv.end(), extra_args.begin(), extra_args.end());
    child_ = std::make_unique<process_child>(argv, "sluiced");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (std::chrono::steady_clock::now() < until && child_->running()) {
      if (healthy(port_)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    why = child_->stderr_text();
    child_->kill();
  }
  throw std::runtime_error("sluiced did not become healthy: " + why);
}

sluiced_process::~sluiced_process() {
  child_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void sluiced_process::write_config(const std::string& yaml) {
  // Write then rename, so a reload never reads half a file.
  const auto tmp = config_path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << yaml;
  }
  std::filesystem::rename(tmp, config_path_);
}

bool sluiced_process::reload(std::chrono::milliseconds within) {
  const auto before = child_->stderr_text();
  const auto applied0 = count_of(before, "reload: applied");
  const auto rejected0 = count_of(before, "reload: rejected");
  child_->signal(SIGHUP);
  const auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    const auto now = child_->stderr_text();
    if (count_of(now, "reload: applied") > applied0) return true;
    if (count_of(now, "reload: rejected") > rejected0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  throw std::runtime_error("sluiced logged no reload outcome after SIGHUP");
}

}  // namespace sluice::test
