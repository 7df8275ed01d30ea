#include "support/test_pki.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace sluice::test {
namespace {

constexpr const char* new_key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

test_pki::test_pki() {
  char tmpl[] = "/tmp/sluice-pki-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = tmpl;
  try {
    make_ca("ca", "/CN=sluice test CA");
    make_ca("other-ca", "/CN=some other CA");
    make_leaf(
        "server", "/CN=localhost",
        // clientAuth too: Redis nodes present it as clients on the cluster bus and
        // replication links.
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
    make_leaf("named", "/CN=redis.test",
              "subjectAltName=DNS:redis.test\nextendedKeyUsage=serverAuth\n");
    make_leaf("client", "/CN=sluice test client", "extendedKeyUsage=clientAuth\n");
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

test_pki::~test_pki() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void test_pki::run(const std::string& command) const {
  const std::string log = dir_ + "/openssl.log";
  const std::string full = "cd '" + dir_ + "' && " + command + " >'" + log + "' 2>&1";
  if (std::system(full.c_str()) != 0) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    throw std::runtime_error("test_pki: `" + command + "` failed: " + ss.str());
  }
}

void test_pki::make_ca(const std::string& name, const std::string& subject) const {
  run("openssl req -x509 " + std::string(new_key) + " -keyout " + name + ".key -out " + name +
      ".crt -days 2 -subj '" + subject + "'");
}

std::string test_pki::make_cert(const std::string& name, const std::string& subject,
                                const std::string& extensions, const std::string& issuer) const {
  make_leaf(name, subject, extensions, issuer);
  return dir_ + "/" + name;
}

void test_pki::make_leaf(const std::string& name, const std::string& subject,
                         const std::string& extensions, const std::string& issuer) const {
  {
    std::ofstream ext(dir_ + "/" + name + ".ext");
    ext << extensions;
  }
  run("openssl req " + std::string(new_key) + " -keyout " + name + ".key -out " + name +
      ".csr -subj '" + subject + "'");
  run("openssl x509 -req -in " + name + ".csr -CA " + issuer + ".crt -CAkey " + issuer +
      ".key -CAcreateserial -out " + name + ".crt -days 2 -extfile " + name + ".ext");
}

}  // namespace sluice::test
