#pragma once
// libprotobuf reports some parse failures itself (a string field with invalid UTF-8 is one
// line on stderr per message), which a client could repeat 100,000 times a second outside
// sluiced's log level and throttle. route_protobuf_log sends them through spdlog instead,
// at most one line per burst (log_throttle).
namespace sluice::daemon {

/// Installs the handler (google::protobuf::SetLogHandler). Call once at start-up, before
/// any thread parses a message.
void route_protobuf_log();

}  // namespace sluice::daemon
