#pragma once
/// Loopback helpers for integration tests.
#include <cstdint>

namespace sluice::test {

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
/// Another process may take it before you do; fixtures that start servers retry.
std::uint16_t free_loopback_port();

}  // namespace sluice::test
