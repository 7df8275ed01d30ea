#include "protobuf_log.hpp"

#include <string>

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "log_throttle.hpp"

namespace sluice::daemon {
namespace {

log_throttle& throttle() {
  static log_throttle t;
  return t;
}

void on_protobuf_log(google::protobuf::LogLevel level, const char* file, int line,
                     const std::string& message) {
  // FATAL aborts inside libprotobuf after this returns: always say why.
  const bool fatal = level == google::protobuf::LOGLEVEL_FATAL;
  const auto n = fatal ? 1 : throttle().admit();
  if (n == 0) return;
  const auto lvl = fatal                                      ? spdlog::level::critical
                   : level == google::protobuf::LOGLEVEL_INFO ? spdlog::level::debug
                                                              : spdlog::level::warn;
  spdlog::log(lvl, "libprotobuf ({}:{}): {} ({} such in this burst)", file ? file : "?", line,
              message, n);
}

}  // namespace

void route_protobuf_log() { google::protobuf::SetLogHandler(&on_protobuf_log); }

}  // namespace sluice::daemon
