#include "response_wire.hpp"

#include <array>
#include <cassert>

namespace sluice::daemon {
namespace {

// RFC 9110 5.5: a field value is visible characters, SP and HTAB (bytes >= 0x80 are
// obs-text, allowed). A CR or LF would end the field and let the rest pose as headers or a
// body (response splitting); NUL and other controls are refused by many clients.
bool is_field_value_byte(char ch) noexcept {
  const auto c = static_cast<unsigned char>(ch);
  return c == '\t' || (c >= 0x20 && c != 0x7F);
}

// Appends a field value with every byte that may not appear in one replaced by a space.
// Sluice's own values never need it; a value derived from a request might.
void append_field_value(std::string& out, std::string_view value) {
  const auto start = out.size();
  out.append(value.data(), value.size());
  for (auto i = start; i < out.size(); ++i) {
    if (!is_field_value_byte(out[i])) out[i] = ' ';
  }
}

}  // namespace

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
    append_field_value(out, std::string_view(value.data(), value.size()));
    out.append("\r\n");
  }
  out.append("\r\n");
  out.append(res.body());
}

}  // namespace sluice::daemon
