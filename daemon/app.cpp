#include "app.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <sluice/version.hpp>

#include "envoy/rls_config.hpp"
#include "envoy_rls_server.hpp"
#include "protobuf_log.hpp"
#include "safe_log.hpp"
#include "sd_notify.hpp"
#include "server.hpp"
#include "service.hpp"

namespace sluice::daemon {
namespace {

// An io_context for one server thread, whose shutdown (destroying every handler still
// queued) can be called before it is destroyed.
class worker_context : public boost::asio::io_context {
 public:
  worker_context() : io_context(1) {}
  using execution_context::shutdown;
};

// Runs `io` until it is stopped. An exception out of a handler (a bug: the server and the
// service catch their own) would end the thread, and every connection on it would hang:
// count it and run on. Asio allows run() again right after a handler threw.
void run_guarded(boost::asio::io_context& io, server& srv) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      srv.io_exception(e.what());
    } catch (...) {
      srv.io_exception("unknown exception");
    }
  }
}

// Each connection holds a descriptor, and so do the backend's connections, the listener and
// the log: raise the soft open-file limit (often 1024) towards the hard one so that
// limits.max_connections can be reached, as nginx's worker_rlimit_nofile does.
void fit_open_file_limit(std::size_t max_connections) {
  constexpr rlim_t reserve = 128;
  const rlim_t want = static_cast<rlim_t>(max_connections) + reserve;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < want) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    spdlog::warn(
        "the open-file limit ({}) is below limits.max_connections ({}) + {}: past about {} "
        "connections, accepts fail and pause until some close",
        rl.rlim_cur, max_connections, reserve, rl.rlim_cur > reserve ? rl.rlim_cur - reserve : 0);
  }
}

}  // namespace

namespace asio = boost::asio;

std::string quick_start_text(const config& c) {
  const auto base = "http://" + c.listen();
  std::string s;
  s += "sluiced is running on " + base + " with the built-in config:\n";
  s += "  memory backend; policy \"default\": capacity 10, refill 1/s; rule \"default\": every "
       "path, keyed by client IP\n";
  s += "Try it:\n";
  s += "  curl -s -X POST " + base +
       "/v1/check -H 'Content-Type: application/json' -d "
       "'{\"key\":\"user:42\",\"policy\":\"default\"}'\n";
  s += "  for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code}\\n' " + base +
       "/v1/auth/api/items; done   # 10 x 200, then 429\n";
  s += "  curl -s " + base + "/metrics | grep sluice_decisions_total\n";
  s += "Stop with Ctrl-C (SIGINT) or SIGTERM; see docs/daemon.md for --config.\n";
  return s;
}

void command_line_overrides::apply(config& c) const {
  if (!listen.empty()) {
    try {
      parse_listen(listen, c);
    } catch (const std::invalid_argument& e) {
      throw config_error("--listen", 0, "listen", e.what());
    }
  }
  if (threads) c.threads = threads;
  if (!log_level.empty()) c.log_level = log_level;
}

std::optional<int> parse_command_line(int argc, const char* const* argv, app_options& out,
                                      std::ostream& std_out, std::ostream& err) {
  CLI::App cli{"sluiced: rate-limit decisions over HTTP (/v1/check, /v1/auth, /metrics)"};
  std::string config_path, listen, log_level;
  unsigned threads = 0;
  bool check_only = false;
  cli.add_option("-c,--config", config_path, "YAML config file (default: built-in demo config)");
  cli.add_option("-l,--listen", listen, "HOST:PORT to listen on, overriding the config");
  cli.add_option("-t,--threads", threads,
                 "server threads, overriding the config (0: one per core)");
  cli.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  cli.add_flag("--check-config", check_only, "validate the config and exit (0 valid, 2 invalid)");
  cli.set_version_flag("-V,--version", std::string("sluiced ") + sluice::version);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = cli.exit(e, std_out, err);
    return code == 0 ? 0 : 2;
  }

  out.config_path = config_path;
  if (!log_level.empty() && spdlog::level::from_str(log_level) == spdlog::level::off &&
      log_level != "off") {
    err << "--log-level: unknown level \"" << log_level << "\"\n";
    return 2;
  }
  out.overrides = {listen, threads, log_level};
  try {
    out.cfg = config_path.empty() ? default_config() : load_config_file(config_path);
    out.overrides.apply(out.cfg);
  } catch (const config_error& e) {
    err << e.what() << '\n';
    return 2;
  }
  if (check_only) {
    std_out << out.cfg.source << ": valid\n";
    return 0;
  }
  return std::nullopt;
}

int run(app_options opts) {
  set_daemon_log_level(spdlog::level::from_str(opts.cfg.log_level));
  route_protobuf_log();
  const unsigned threads =
      opts.cfg.threads ? opts.cfg.threads : std::max(1u, std::thread::hardware_concurrency());
  // One io_context per thread, each run by that thread alone: a connection's handlers then
  // never need a strand or a lock, and a thread sleeps in its own epoll instead of being
  // handed work through a shared queue. The first also runs the acceptor and the signals.
  // Declared before the service, so they are destroyed after it: the backend may still
  // complete a check (posting to a connection's io_context) while it shuts down, and a
  // standalone Redis backend's connections run on them (one per thread).
  std::vector<std::unique_ptr<worker_context>> iocs;
  std::vector<asio::io_context*> workers;
  for (unsigned i = 0; i < threads; ++i) {
    iocs.push_back(std::make_unique<worker_context>());
    workers.push_back(iocs.back().get());
  }
  auto& ioc = *iocs.front();
  auto stop_all = [&iocs] {
    for (auto& c : iocs) c->stop();
  };
  std::unique_ptr<service> svc;
  try {
    svc = std::make_unique<service>(opts.cfg, workers);
  } catch (const std::invalid_argument& e) {
    // The config names something unusable (a TLS CA, certificate or key file): an invalid
    // config, found only when the backend loads it.
    spdlog::critical("cannot start the backend: {}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::critical("cannot start the backend: {}", e.what());
    return 1;
  }
  const auto& cfg = svc->current()->cfg;
  fit_open_file_limit(cfg.limits.max_connections +
                      (cfg.envoy_rls.enabled() ? cfg.envoy_rls.transport.max_connections : 0));
  auto srv = std::make_shared<server>(ioc, *svc, workers);
  asio::ip::tcp::endpoint bound;
  try {
    bound = srv->listen({asio::ip::make_address(cfg.listen_host), cfg.listen_port});
  } catch (const std::exception& e) {
    spdlog::critical("cannot listen on {}: {}", cfg.listen(), e.what());
    return 1;
  }
  srv->start();
  const auto host = bound.address().is_v6() ? "[" + bound.address().to_string() + "]"
                                            : bound.address().to_string();
  spdlog::info("sluiced listening on {}:{} ({} threads, backend {}, config {})", host, bound.port(),
               threads, redacted_url(cfg.backend), cfg.source);
  // Envoy's rate limit service on its own gRPC listener, when the config has envoy_rls.
  std::unique_ptr<rls_server> rls;
  if (cfg.envoy_rls.enabled()) {
    rls = std::make_unique<rls_server>(*svc, ioc, workers);
    try {
      const auto& tls = cfg.envoy_rls.tls;
      const auto port = rls->start(cfg.envoy_rls.listen_host, cfg.envoy_rls.listen_port, tls);
      auto shown = cfg.envoy_rls;
      shown.listen_port = port;
      spdlog::info(
          "envoy_rls: ShouldRateLimit (gRPC) listening on {} ({} domains, on backend "
          "failure: {}, {})",
          shown.listen(), cfg.envoy_rls.limits->domains.size(),
          to_string(cfg.envoy_rls.on_backend_failure),
          !tls.enabled()               ? "plaintext"
          : tls.client_ca_file.empty() ? "TLS"
                                       : "mutual TLS");
    } catch (const std::exception& e) {
      spdlog::critical("cannot listen on {} (envoy_rls): {}", cfg.envoy_rls.listen(), e.what());
      return 1;
    }
  }
  if (opts.config_path.empty()) {
    auto shown = cfg;
    shown.listen_port = bound.port();
    std::cout << quick_start_text(shown) << std::flush;
  }

  asio::signal_set signals(ioc, SIGINT, SIGTERM, SIGHUP);
  bool stopping = false;
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGHUP) {
          if (opts.config_path.empty()) {
            spdlog::warn("SIGHUP: no --config file to reload");
          } else {
            notify_service_manager("RELOADING=1");
            const bool ok = svc->reload(
                opts.config_path, [&overrides = opts.overrides](config& c) { overrides.apply(c); });
            // New TLS credentials of the gRPC listener, for its next connections.
            if (ok && rls && svc->current()->cfg.envoy_rls.enabled())
              rls->reload_tls(svc->current()->cfg.envoy_rls.tls);
            notify_service_manager(ok ? "READY=1\nSTATUS=serving; config reloaded"
                                      : "READY=1\nSTATUS=serving; reload rejected (see the log)");
          }
        } else if (!stopping) {
          stopping = true;
          notify_service_manager("STOPPING=1");
          spdlog::info("signal {}: draining in-flight requests", sig);
          // Both listeners drain (the gRPC one with GOAWAY); the threads stop once both
          // are done (each may finish on any worker thread).
          const auto deadline = svc->current()->cfg.limits.shutdown_timeout;
          auto left = std::make_shared<std::atomic<int>>(rls ? 2 : 1);
          auto one_done = [left, &stop_all] {
            if (--*left > 0) return;
            spdlog::info("drained; exiting");
            stop_all();
          };
          if (rls) rls->drain(deadline, one_done);
          srv->drain(deadline, one_done);
        } else {
          spdlog::warn("second signal {}: exiting now", sig);
          stop_all();
          return;
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);
  // Ready only now: listening, and SIGHUP / SIGTERM handled (a reload systemd sends right
  // after READY must not find the default action, which ends the process).
  notify_service_manager("READY=1\nSTATUS=serving on " + host + ":" + std::to_string(bound.port()));

  // Each io_context runs until stop_all(), also while it has no connection.
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
  for (auto& c : iocs) keep_running.push_back(asio::make_work_guard(*c));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) {
    pool.emplace_back([c = iocs[i].get(), &srv] { run_guarded(*c, *srv); });
  }
  run_guarded(ioc, *srv);
  for (auto& t : pool) t.join();
  // The gRPC connections left (after a forced stop) are handlers of the io_contexts now,
  // and go with them below.
  rls.reset();
  // Handlers still queued (after a forced stop) hold runtimes, and a runtime holds the
  // backends of every thread, whose connections live on these io_contexts: destroy the
  // handlers while every io_context still exists, then the service, then the contexts.
  for (auto& c : iocs) c->shutdown();
  svc.reset();
  return 0;
}

}  // namespace sluice::daemon
