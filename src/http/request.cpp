#include <sluice/http/request.hpp>

#include <cctype>

#include "http/text.hpp"

namespace sluice::http {

header_map::header_map(std::initializer_list<std::pair<std::string, std::string>> fields) {
  for (const auto& [name, value] : fields) add(name, value);
}

void header_map::add(std::string_view name, std::string_view value) {
  for (auto& [n, v] : fields_) {
    if (detail::iequals(n, name)) {
      v += ", ";
      v += value;
      return;
    }
  }
  fields_.emplace_back(std::string(name), std::string(value));
}

void header_map::set(std::string_view name, std::string_view value) {
  for (auto& [n, v] : fields_) {
    if (detail::iequals(n, name)) {
      v = std::string(value);
      return;
    }
  }
  fields_.emplace_back(std::string(name), std::string(value));
}

std::optional<std::string> header_map::get(std::string_view name) const {
  for (const auto& [n, v] : fields_) {
    if (detail::iequals(n, name)) return v;
  }
  return std::nullopt;
}

header_lookup header_map::lookup() const {
  return [this](std::string_view name) { return get(name); };
}

}  // namespace sluice::http

namespace sluice::http {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_unreserved(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

}  // namespace

std::string normalize_path(std::string_view target) {
  target = target.substr(0, target.find_first_of("?#"));
  // Absolute form (RFC 9112 §3.2.2): drop `scheme://authority`.
  if (const auto scheme = target.find("://");
      scheme != std::string_view::npos && target.find('/') > scheme) {
    const auto path_start = target.find('/', scheme + 3);
    target =
        path_start == std::string_view::npos ? std::string_view("/") : target.substr(path_start);
  }

  // Decode escapes of unreserved characters; keep the others, in upper case. A '%' that
  // starts no escape is written as one (%25), as a server reads it: kept bare, it would
  // pair with decoded digits after it (`%%36%31` -> `%61`), so the result would not be its
  // own normal form, and `/%%36%31` and `/%2561`, one path to a server, would differ here.
  std::string decoded;
  decoded.reserve(target.size() + 1);
  for (std::size_t i = 0; i < target.size(); ++i) {
    const char c = target[i];
    if (c == '%' && i + 2 < target.size() && hex_value(target[i + 1]) >= 0 &&
        hex_value(target[i + 2]) >= 0) {
      const char v = char(hex_value(target[i + 1]) * 16 + hex_value(target[i + 2]));
      if (is_unreserved(v)) {
        decoded += v;
      } else {
        decoded += '%';
        decoded += char(std::toupper(static_cast<unsigned char>(target[i + 1])));
        decoded += char(std::toupper(static_cast<unsigned char>(target[i + 2])));
      }
      i += 2;
    } else if (c == '%') {
      decoded += "%25";
    } else {
      decoded += c;
    }
  }

  // Split into segments, merging empty ones (repeated slashes) and resolving dots.
  std::vector<std::string_view> segments;
  bool trailing_slash = false;
  std::string_view rest = decoded;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const auto seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    const bool last = slash == std::string_view::npos;
    if (seg.empty() || seg == ".") {
      trailing_slash = last || rest.empty();
    } else if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
      trailing_slash = last || rest.empty();
    } else {
      segments.push_back(seg);
      trailing_slash = !last && rest.empty();
    }
  }
  std::string out;
  out.reserve(decoded.size() + 1);
  for (const auto seg : segments) {
    out += '/';
    out += seg;
  }
  if (out.empty() || trailing_slash) out += '/';
  return out;
}

}  // namespace sluice::http
