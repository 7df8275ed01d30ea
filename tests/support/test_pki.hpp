#pragma once
/// Throw-away certificates for TLS tests, made by the `openssl` command in a temporary
/// directory at run time (no key is ever committed), removed with the object:
///
///   ca            the test CA ("sluice test CA"), which signs everything below
///   other_ca      an unrelated CA: trusting it instead of `ca` must fail the handshake
///   server        CN=localhost, SAN DNS:localhost and IP:127.0.0.1
///   named_server  SAN DNS:redis.test only: connecting to 127.0.0.1 verifies only with
///                 sni=redis.test
///   client        a client certificate (for --tls-auth-clients yes)
///
/// EC P-256 keys, valid for two days. Throws std::runtime_error (with openssl's output)
/// when a command fails. Not thread-safe.
#include <string>

namespace sluice::test {

class test_pki {
 public:
  test_pki();
  ~test_pki();
  test_pki(const test_pki&) = delete;
  test_pki& operator=(const test_pki&) = delete;

  const std::string& dir() const noexcept { return dir_; }
  std::string ca() const { return dir_ + "/ca.crt"; }
  std::string other_ca() const { return dir_ + "/other-ca.crt"; }
  std::string server_cert() const { return dir_ + "/server.crt"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  std::string named_server_cert() const { return dir_ + "/named.crt"; }
  std::string named_server_key() const { return dir_ + "/named.key"; }
  std::string client_cert() const { return dir_ + "/client.crt"; }
  std::string client_key() const { return dir_ + "/client.key"; }

  /// One more leaf in dir(): `name`.crt and `name`.key, with `extensions` (openssl's
  /// extension file lines, e.g. "subjectAltName=URI:spiffe://x/y\n"), signed by `issuer`
  /// ("ca" or "other-ca"). Returns dir() + "/" + name.
  std::string make_cert(const std::string& name, const std::string& subject,
                        const std::string& extensions, const std::string& issuer = "ca") const;

 private:
  void run(const std::string& command) const;
  void make_ca(const std::string& name, const std::string& subject) const;
  void make_leaf(const std::string& name, const std::string& subject, const std::string& extensions,
                 const std::string& issuer = "ca") const;
  std::string dir_;
};

}  // namespace sluice::test
