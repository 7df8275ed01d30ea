#pragma once
// Unguessable random bytes for the library (concurrency slot ids), from one process-wide
// CSPRNG: OpenSSL's AES-256 CTR-DRBG, seeded from the kernel. Private to the library.
#include <cstddef>
#include <cstdint>

namespace sluice::detail {

/// Fills `n` bytes (at most 65536 per call) at `p`. Thread-safe; a forked child's generator
/// is reseeded before it gives anything, so parent and child never draw the same bytes.
/// Throws std::system_error if the generator cannot be set up or seeded.
void fill_random_bytes(void* p, std::size_t n);

/// How many forks this process is from where it started (raised in each child): a cache of
/// random bytes made before a fork must not be used after it. Thread-safe.
std::uint64_t fork_generation() noexcept;

}  // namespace sluice::detail
