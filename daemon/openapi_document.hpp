#pragma once
// The HTTP API's OpenAPI 3.1 document (packaging/openapi/sluiced.openapi.json), compiled in
// at build time (cmake/embed_text_file.cmake) and served at GET /openapi.json.
#include <string_view>

namespace sluice::daemon {
/// The document's text (joined from its pieces on first use; thread-safe).
std::string_view openapi_document();
}  // namespace sluice::daemon
