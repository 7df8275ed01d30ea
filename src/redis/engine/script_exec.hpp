#pragma once
// One script call on one connection, written once for every call of the connection's one
// queue (decision_batcher.hpp: its single and batch calls, and the opaque ones it carries
// for the multi-key call and the Cluster client): EVALSHA first; when the server
// answers NOSCRIPT (it lost its scripts: SCRIPT FLUSH), the script's source once as EVAL, on
// the same connection and within the same deadline. EVAL caches the script again, so later
// calls go back to EVALSHA. A second NOSCRIPT reaches the caller, whose decoder reports it as
// a script error (to_error(script_reply::noscript)).
//
// `Call` is the call's own state, copied into the connection's handler (a std::function), so
// it holds big things by pointer:
//   void append(std::string& out, script_call how) const;  // the command, EVALSHA or EVAL
//   void operator()(std::error_code, reply_ptr);           // the last reply, exactly once
#include <sluice/error.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "redis/connection.hpp"
#include "redis/decide_command.hpp"
#include "redis/reply_action.hpp"

namespace sluice::redis {

/// Called on the connection's I/O thread only, by the connection's one queue of script
/// calls (decision_batcher.hpp), which admitted the call: it goes straight into the
/// connection's write queue.
struct script_exec {
  std::chrono::steady_clock::time_point deadline;
  /// Formatted commands in the call (Cluster's ASKING before the script: 2); the handler
  /// gets the last reply.
  std::size_t replies = 1;
  /// Counts NOSCRIPT answers, when set.
  std::atomic<std::uint64_t>* noscript = nullptr;
};

template <class Call>
void exec_script(const std::shared_ptr<connection>& conn, const script_exec& how, Call call) {
  std::string command;
  call.append(command, script_call::evalsha);
  auto on_reply = [conn, how, call = std::move(call)](std::error_code ec, reply_ptr reply) mutable {
    if (!ec && classify_reply(*reply).what == reply_action::kind::resend_as_eval) {
      if (how.noscript) how.noscript->fetch_add(1, std::memory_order_relaxed);
      std::string eval;
      call.append(eval, script_call::eval);
      conn->exec_on_io_thread(how.deadline, std::move(eval), std::move(call), how.replies);
      return;
    }
    // What a moved server explains (READONLY from a demoted master, any other error reply,
    // silence, a lost connection): the connection's address source may look again (a
    // Sentinel's does, at most every 100 ms; a fixed address does nothing).
    if (ec ? ec == errc::backend_unavailable || ec == errc::backend_timeout ||
                 ec == errc::backend_protocol_error
           : is_error(*reply)) {
      conn->address_suspect();
    }
    call(ec, std::move(reply));
  };
  conn->exec_on_io_thread(how.deadline, std::move(command), std::move(on_reply), how.replies);
}

}  // namespace sluice::redis
