#pragma once
// PEM files the daemon is given at start (envoy_rls.tls): read and checked with OpenSSL when
// the config loads, so that a wrong file is a config error naming the field (exit 2, a
// refused reload) rather than a listener that fails to start with gRPC's own words.
#include <optional>
#include <string>

namespace sluice::daemon {

enum class pem_kind {
  certificates,  ///< one or more certificates (a chain, or CA certificates)
  private_key,   ///< one private key, unencrypted
};

/// The contents of `path` when it is a readable regular file (at most 1 MiB) holding what
/// `kind` says in PEM; otherwise std::nullopt and `why` says what is wrong.
std::optional<std::string> read_pem_file(const std::string& path, pem_kind kind, std::string& why);

/// Whether `key_pem` is the private key of the first certificate in `cert_pem`.
bool pem_key_matches(const std::string& cert_pem, const std::string& key_pem);

}  // namespace sluice::daemon
