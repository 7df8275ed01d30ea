#pragma once
/// A child process for integration tests: started with an argument vector, stdout and
/// stderr captured to files, killed (SIGKILL) and reaped when the object is destroyed, and
/// killed by the kernel if the test thread dies first (PR_SET_PDEATHSIG).
/// Not thread-safe: drive one object from one thread.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace sluice::test {

class process_child {
 public:
  /// Starts `argv[0]` (a path, or a name looked up in PATH) with `argv`. Output goes to
  /// `<dir>/<name>.stdout` and `.stderr` in a fresh temporary directory. Throws
  /// std::runtime_error when it cannot be started.
  explicit process_child(std::vector<std::string> argv, std::string name = "child");
  ~process_child();
  process_child(const process_child&) = delete;
  process_child& operator=(const process_child&) = delete;

  pid_t pid() const noexcept { return pid_; }
  bool running();
  /// Sends `sig` (no-op once the process has been reaped).
  void signal(int sig);
  /// Waits up to `within` for the exit; the exit status as a shell would show it
  /// (the exit code, or 128 + signal), or std::nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds within);
  /// SIGKILL and reap (no-op after exit).
  void kill();

  std::string stdout_text() const;
  std::string stderr_text() const;
  const std::string& dir() const noexcept { return dir_; }

 private:
  bool reap(bool block);
  std::string dir_;
  std::string name_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// Reads a whole file ("" when it cannot be read).
std::string read_file_text(const std::string& path);

/// A fresh temporary directory (removed by the caller or left in /tmp).
std::string make_temp_dir(const std::string& prefix);

/// A tool run to its end: its exit status (-1 when it did not end in time) and its stdout
/// and stderr together.
struct run_result {
  int status = -1;
  std::string output;
};
/// Runs `argv` (a path, or a name looked up in PATH) and waits up to `within` for it.
run_result run_to_end(std::vector<std::string> argv, std::chrono::milliseconds within);

}  // namespace sluice::test
