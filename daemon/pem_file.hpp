#pragma once
// PEM files the daemon is given at start (envoy_rls.tls): read and checked with OpenSSL when
// the config loads, so that a wrong file is a config error naming the field (exit 2, a
// refused reload) rather than a listener that fails to start with gRPC's own words.
#include <optional>
#include <string>
#include <string_view>

struct x509_st;

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

/// Whether `cert` carries `san` among its subject alternative names, as the reference's
/// GRPC_CLIENT_TLS_SAN checks a client certificate: a URI (`spiffe://...`, anything with
/// "://") equal to one of its URI names; an IP address equal to one of its IP names; else a
/// DNS name matching one of its DNS names (a `*.` wildcard in the certificate covers one
/// label). The subject's common name is never used, as the reference's Go does not.
bool certificate_has_san(x509_st* cert, std::string_view san);

/// certificate_has_san for the first certificate in `cert_pem` (false when there is none).
bool pem_certificate_has_san(const std::string& cert_pem, std::string_view san);

}  // namespace sluice::daemon
