#pragma once
// systemd's readiness protocol (sd_notify(3)), spoken directly: one datagram to the unix
// socket $NOTIFY_SOCKET names. libsystemd would be a dependency for these few lines; the
// protocol is stable and documented. Outside systemd (no $NOTIFY_SOCKET) it does nothing.
#include <string_view>

namespace sluice::daemon {

/// Sends `state` (e.g. "READY=1", "RELOADING=1", "STOPPING=1", lines joined by '\n') to the
/// service manager, if there is one. Never throws; a failure is ignored (systemd then times
/// out the start, which is the right outcome for a daemon that cannot tell it is ready).
void notify_service_manager(std::string_view state) noexcept;

}  // namespace sluice::daemon
