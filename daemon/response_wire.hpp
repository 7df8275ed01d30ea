#pragma once
// A response's bytes on the wire, written into a string the connection reuses. Beast's
// serializer produces the same bytes but walks them as a generic buffer sequence (a
// tenth of sluiced's CPU per /v1/check in the profile); a string_body response with its
// Content-Length set is a status line, the fields and the body, nothing more.
#include <string>

#include "service.hpp"

namespace sluice::daemon {

/// Appends `res` as HTTP/1.x to `out`: the status line, every field in order, the blank
/// line and the body, byte for byte what Beast's serializer writes for it. The caller sets
/// Content-Length (prepare_payload()); a chunked response is not supported (none is produced).
/// A field value byte that RFC 9110 does not allow there (CR, LF, NUL, other controls but
/// HTAB) is written as a space: no value can split the response, wherever it came from.
void append_wire_response(const http_response& res, std::string& out);

}  // namespace sluice::daemon
