#include "redis/script_request.hpp"

#include <string_view>

namespace sluice::redis {

void script_request::append(std::string& out, script_call how) const {
  const std::string nkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(how == script_call::evalsha ? "EVALSHA" : "EVAL");
  argv.push_back(how == script_call::evalsha ? script->sha1 : script->source);
  argv.push_back(nkeys);
  for (const auto& k : keys) argv.push_back(k);
  for (const auto& a : args) argv.push_back(a);
  append_command(out, argv.data(), argv.size());
}

}  // namespace sluice::redis
