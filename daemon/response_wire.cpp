#include "response_wire.hpp"

#include <array>
#include <cassert>

namespace sluice::daemon {

void append_wire_response(const http_response& res, std::string& out) {
  assert(!res.chunked() && "sluiced sends every body with a Content-Length");
  const unsigned version = res.version();
  const unsigned status = res.result_int();
  const auto reason = res.reason();
  // "HTTP/1.1 200 " : the version is 10 or 11, the status three digits.
  std::array<char, 13> line{'H',
                            'T',
                            'T',
                            'P',
                            '/',
                            static_cast<char>('0' + version / 10 % 10),
                            '.',
                            static_cast<char>('0' + version % 10),
                            ' ',
                            static_cast<char>('0' + status / 100 % 10),
                            static_cast<char>('0' + status / 10 % 10),
                            static_cast<char>('0' + status % 10),
                            ' '};
  std::size_t size = line.size() + reason.size() + 4 + res.body().size();
  for (const auto& f : res) size += f.name_string().size() + f.value().size() + 4;
  out.reserve(out.size() + size);
  out.append(line.data(), line.size());
  out.append(reason.data(), reason.size());
  out.append("\r\n");
  for (const auto& f : res) {
    const auto name = f.name_string();
    const auto value = f.value();
    out.append(name.data(), name.size());
    out.append(": ");
    out.append(value.data(), value.size());
    out.append("\r\n");
  }
  out.append("\r\n");
  out.append(res.body());
}

}  // namespace sluice::daemon
