# cmake -DNAME=n -DINPUT=file -DHEADER=h.hpp -DNAMESPACE=ns -DOUTPUT=file.cpp -P embed_text_file.cmake
# Defines `std::string_view NAME()` in namespace NAMESPACE (declared in HEADER): the file's
# text, byte for byte, so a document served or printed has no second copy to drift. The text
# is written as raw-string pieces under 60,000 bytes (compilers need support only 65,536 in
# one literal: clang's -Woverlength-strings) and joined once, on first use.
file(READ ${INPUT} body)
string(FIND "${body}" ")sluice_text\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )sluice_text\"")
endif()
string(LENGTH "${body}" length)
set(pieces "")
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${body}" ${offset} 60000 piece)
  string(APPEND pieces "      R\"sluice_text(${piece})sluice_text\",\n")
  math(EXPR offset "${offset} + 60000")
endwhile()
file(WRITE ${OUTPUT}.tmp
"// Generated from ${INPUT} by cmake/embed_text_file.cmake. Do not edit.
#include \"${HEADER}\"

#include <string>

namespace ${NAMESPACE} {
std::string_view ${NAME}() {
  static const std::string text = [] {
    std::string t;
    for (const char* piece : {
${pieces}         }) {
      t += piece;
    }
    return t;
  }();
  return text;
}
}  // namespace ${NAMESPACE}
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
