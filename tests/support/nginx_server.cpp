#include "support/nginx_server.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "support/daemon_http_client.hpp"
#include "support/loopback.hpp"

namespace sluice::test {

std::string nginx_path() {
#ifdef SLUICE_NGINX_PATH
  return SLUICE_NGINX_PATH;
#else
  return "";
#endif
}

nginx_server::nginx_server(
    const std::function<std::string(std::uint16_t port, const std::string& dir)>& server_block)
    : dir_(make_temp_dir("sluice-nginx")) {
  if (nginx_path().empty()) throw std::runtime_error("nginx is not installed");
  std::filesystem::create_directories(dir_ + "/html");
  std::filesystem::create_directories(dir_ + "/logs");
  std::ofstream(dir_ + "/html/index.html") << "hello\n";
  std::string why;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    std::string conf;
    // Harness-only settings: one process in the foreground (no master/worker, so nothing
    // outlives the test and no user switch), everything written under the temp dir.
    conf += "master_process off;\n";
    conf += "worker_processes 1;\n";
    conf += "pid " + dir_ + "/nginx.pid;\n";
    conf += "error_log " + dir_ + "/logs/error.log info;\n";
    conf += "events { worker_connections 256; }\n";
    conf += "http {\n";
    conf += "  access_log " + dir_ + "/logs/access.log;\n";
    for (auto t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
      conf += "  " + std::string(t) + "_temp_path " + dir_ + "/" + t + "_temp;\n";
    }
    conf += server_block(port_, dir_);
    conf += "}\n";
    std::ofstream(dir_ + "/nginx.conf", std::ios::trunc) << conf;
    child_ = std::make_unique<process_child>(
        std::vector<std::string>{nginx_path(), "-p", dir_, "-c", dir_ + "/nginx.conf", "-e",
                                 dir_ + "/logs/error.log", "-g", "daemon off;"},
        "nginx");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
    while (std::chrono::steady_clock::now() < until && child_->running()) {
      if (port_accepts(port_)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    why = error_log() + child_->stderr_text();
    child_->kill();
  }
  throw std::runtime_error("nginx did not start: " + why);
}

nginx_server::~nginx_server() {
  child_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string nginx_server::config_text() const { return read_file_text(dir_ + "/nginx.conf"); }
std::string nginx_server::error_log() const { return read_file_text(dir_ + "/logs/error.log"); }

}  // namespace sluice::test
