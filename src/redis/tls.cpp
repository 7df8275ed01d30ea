#include "redis/tls.hpp"

#include <cstring>
#include <stdexcept>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace sluice::redis {
namespace asio = boost::asio;

namespace {

// The OpenSSL reason of the last failure ("no such file", "no start line", "key values
// mismatch"), which says more than Asio's generic error text.
std::string reason(const boost::system::error_code& ec) {
  std::string text = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    // Asio stores OpenSSL's packed error code; go through unsigned to keep its top bit,
    // which marks a system error (errno in the reason: a missing or unreadable file).
    const unsigned long e = static_cast<unsigned int>(ec.value());
    if (ERR_SYSTEM_ERROR(e)) {
      text = std::strerror(ERR_GET_REASON(e));
    } else if (const char* r = ERR_reason_error_string(e)) {
      text = r;
    }
  }
  return text;
}

[[noreturn]] void cannot_load(const char* what, const std::string& file,
                              const boost::system::error_code& ec) {
  throw std::invalid_argument(std::string("cannot load the TLS ") + what + " file \"" + file +
                              "\": " + reason(ec));
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_tls_context(const redis_tls& tls) {
  if (!tls.enabled) return nullptr;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  // Redis 6+ speaks TLS 1.2 and 1.3; older protocol versions are not worth accepting.
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  if (!tls.ca_file.empty()) {
    ctx->load_verify_file(tls.ca_file, ec);
    if (ec) cannot_load("CA", tls.ca_file, ec);
  } else {
    ctx->set_default_verify_paths(ec);
    if (ec) throw std::invalid_argument("cannot load the system's CA certificates: " + reason(ec));
  }
  if (!tls.cert_file.empty()) {
    ctx->use_certificate_chain_file(tls.cert_file, ec);
    if (ec) cannot_load("certificate", tls.cert_file, ec);
    // OpenSSL checks here that the key belongs to the certificate loaded above.
    ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec);
    if (ec) cannot_load("key", tls.key_file, ec);
  }
  return ctx;
}

tls_config make_tls_config(const redis_tls& tls) {
  tls_config c;
  c.context = make_tls_context(tls);
  c.verify = tls.verify;
  c.server_name = tls.sni;
  return c;
}

}  // namespace sluice::redis
