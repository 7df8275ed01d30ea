#include "pem_file.hpp"

#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

namespace sluice::daemon {
namespace {

// Far above any certificate chain or key; a bound so that a wrong path (a log, a device)
// is refused instead of read whole.
constexpr std::size_t max_pem_size = 1024 * 1024;

struct bio_free {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct x509_free {
  void operator()(X509* x) const noexcept { X509_free(x); }
};
struct pkey_free {
  void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
using bio_ptr = std::unique_ptr<BIO, bio_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;

bio_ptr memory_bio(const std::string& text) {
  return bio_ptr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// A passphrase callback that has none: an encrypted key fails to load instead of
// OpenSSL asking on the terminal.
int no_passphrase(char*, int, int, void*) { return 0; }

x509_ptr first_certificate(const std::string& pem) {
  auto bio = memory_bio(pem);
  return x509_ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
}

pkey_ptr private_key(const std::string& pem) {
  auto bio = memory_bio(pem);
  return pkey_ptr(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr)
                      : nullptr);
}

}  // namespace

std::optional<std::string> read_pem_file(const std::string& path, pem_kind kind, std::string& why) {
  const auto quoted = "\"" + path + "\"";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    why = "cannot read " + quoted + ": " + std::generic_category().message(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    why = quoted + " is not a regular file";
    return std::nullopt;
  }
  if (static_cast<std::size_t>(st.st_size) > max_pem_size) {
    why = quoted + " is larger than 1 MiB";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) {
    why = "cannot read " + quoted + ": " + std::generic_category().message(errno);
    return std::nullopt;
  }
  auto pem = std::move(text).str();
  const bool ok = kind == pem_kind::certificates ? first_certificate(pem) != nullptr
                                                 : private_key(pem) != nullptr;
  ERR_clear_error();  // what OpenSSL queued for a failed parse is said below, in our words
  if (!ok) {
    why = quoted + (kind == pem_kind::certificates ? " holds no PEM certificate"
                                                   : " holds no unencrypted PEM private key");
    return std::nullopt;
  }
  return pem;
}

bool pem_key_matches(const std::string& cert_pem, const std::string& key_pem) {
  auto cert = first_certificate(cert_pem);
  auto key = private_key(key_pem);
  const bool ok = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  return ok;
}

bool certificate_has_san(X509* cert, std::string_view san) {
  if (!cert || san.empty()) return false;
  if (san.find("://") != std::string_view::npos) {
    auto* names =
        static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
    bool found = false;
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names) && !found; ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
      if (g->type != GEN_URI) continue;
      const auto* uri = g->d.uniformResourceIdentifier;
      found = std::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                               static_cast<std::size_t>(ASN1_STRING_length(uri))) == san;
    }
    GENERAL_NAMES_free(names);
    return found;
  }
  const std::string name(san);
  // -2: not an IP address at all, so a DNS name.
  const int ip = X509_check_ip_asc(cert, name.c_str(), 0);
  bool ok = ip >= 0 ? ip == 1
                    : X509_check_host(cert, name.data(), name.size(),
                                      X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr) == 1;
  ERR_clear_error();
  return ok;
}

bool pem_certificate_has_san(const std::string& cert_pem, std::string_view san) {
  auto cert = first_certificate(cert_pem);
  const bool ok = cert && certificate_has_san(cert.get(), san);
  ERR_clear_error();
  return ok;
}

}  // namespace sluice::daemon
