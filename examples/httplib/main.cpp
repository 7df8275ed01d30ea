// A cpp-httplib server rate-limited by Sluice: one pre-routing handler protects every route.
//
//   sluice_example_httplib [--port 8081] [--backend memory|redis://127.0.0.1:6379]
//                          [--trust CIDR]...
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <httplib.h>

#include <sluice/http/httplib.hpp>
#include <sluice/http/middleware.hpp>
#include <sluice/sluice.hpp>

namespace {

struct options {
  int port = 8081;
  std::string backend = "memory";
  std::vector<std::string> trusted;
};

[[noreturn]] void usage(int code) {
  (code ? std::cerr : std::cout)
      << "usage: sluice_example_httplib [--port N] [--backend memory|redis://HOST:PORT] "
         "[--trust CIDR]...\n"
         "  --trust CIDR  believe X-Forwarded-For from peers in CIDR (repeatable)\n";
  std::exit(code);
}

options parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--port") {
      o.port = std::atoi(value().c_str());
      if (o.port <= 0 || o.port > 65535) usage(2);
    } else if (a == "--backend") {
      o.backend = value();
    } else if (a == "--trust") {
      o.trusted.push_back(value());
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      usage(2);
    }
  }
  return o;
}

sluice::policy bucket(std::uint64_t capacity, double refill_per_second) {
  sluice::policy p;
  p.capacity = capacity;
  p.refill_per_second = refill_per_second;
  return p;
}

sluice::http::rule make_rule(std::string name, std::string prefix, std::string_view key,
                             std::string policy, bool shadow = false,
                             std::vector<std::string> methods = {}) {
  sluice::http::rule r;
  r.name = std::move(name);
  r.match.path_prefix = std::move(prefix);
  r.match.methods = std::move(methods);
  r.key = *sluice::http::key_spec::parse(key);
  r.policy = std::move(policy);
  r.shadow = shadow;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const auto opts = parse_args(argc, argv);

  sluice::http::key_options keys;
  for (const auto& text : opts.trusted) {
    std::string why;
    auto range = sluice::http::parse_cidr(text, &why);
    if (!range) {
      std::cerr << "--trust " << why << "\n";
      return 2;
    }
    keys.trusted_proxies.push_back(*range);
  }
  // Rules are validated once; a server that reloads them swaps the shared_ptr.
  auto rules = std::make_shared<const sluice::http::rule_set>(
      std::map<std::string, sluice::policy, std::less<>>{
          {"api", bucket(5, 1)}, {"login", bucket(3, 0.1)}, {"site", bucket(100, 10)}},
      std::vector<sluice::http::rule>{make_rule("login", "/login", "ip", "login", false, {"POST"}),
                                      make_rule("api", "/api/", "header:X-API-Key|ip", "api"),
                                      make_rule("everything", "/", "ip", "site", /*shadow=*/true)},
      keys);
  auto limiter = sluice::limiter_from_url(opts.backend);

  httplib::Server server;
  server.set_pre_routing_handler(
      sluice::http::cpp_httplib::make_pre_routing_handler(limiter, [rules] { return rules; }));
  server.Get("/api/hello", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"hello\":\"world\"}\n", "application/json");
  });
  server.Post("/login", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("welcome\n", "text/plain");
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("home (only a shadow rule applies here)\n", "text/plain");
  });

  if (!server.bind_to_port("127.0.0.1", opts.port)) {
    std::cerr << "cannot listen on 127.0.0.1:" << opts.port << "\n";
    return 1;
  }
  const auto base = "http://127.0.0.1:" + std::to_string(opts.port);
  std::cout << "sluice httplib example on " << base << " (backend " << opts.backend << ")\n"
            << "  api:   5 requests burst, 1/s per X-API-Key (or per IP without one)\n"
            << "  login: 3 attempts burst, 1 per 10 s per IP (POST /login)\n"
            << "Try:\n"
            << "  for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code}\\n' " << base
            << "/api/hello; done\n"
            << "  curl -i -H 'X-API-Key: demo' " << base << "/api/hello\n"
            << "  for i in 1 2 3 4; do curl -si -d user=me " << base << "/login | head -1; done\n"
            << "  curl -si -d user=me " << base << "/login\n"
            << std::flush;
  server.listen_after_bind();
  return 0;
}
