#include "support/process_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace sluice::test {

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  return tmpl;
}

run_result run_to_end(std::vector<std::string> argv, std::chrono::milliseconds within) {
  process_child p(std::move(argv), "tool");
  const auto status = p.wait(within);
  return {status.value_or(-1), p.stdout_text() + p.stderr_text()};
}

process_child::process_child(std::vector<std::string> argv, std::string name)
    : dir_(make_temp_dir("sluice-" + name)), name_(std::move(name)) {
  if (argv.empty()) throw std::invalid_argument("process_child: empty argv");
  const std::string out = dir_ + "/" + name_ + ".stdout";
  const std::string err = dir_ + "/" + name_ + ".stderr";
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    // Child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    // Unblock everything the test runner may have blocked, so signals reach the child.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
}

process_child::~process_child() {
  kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

bool process_child::reap(bool block) {
  if (status_) return true;
  if (pid_ <= 0) return true;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
  }
  return false;
}

bool process_child::running() { return !reap(false); }

void process_child::signal(int sig) {
  if (!status_ && pid_ > 0 && !reap(false)) ::kill(pid_, sig);
}

std::optional<int> process_child::wait(std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (!reap(false)) {
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  return status_;
}

void process_child::kill() {
  if (status_ || pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  reap(true);
}

std::string process_child::stdout_text() const {
  return read_file_text(dir_ + "/" + name_ + ".stdout");
}
std::string process_child::stderr_text() const {
  return read_file_text(dir_ + "/" + name_ + ".stderr");
}

}  // namespace sluice::test
