# cmake -DNAME=n -DINPUT=file -DHEADER=h.hpp -DNAMESPACE=ns -DOUTPUT=file.cpp -P embed_text_file.cmake
# Defines `const std::string_view NAME` in namespace NAMESPACE (declared in HEADER) as the
# file's text, byte for byte, so a document served or printed has no second copy to drift.
file(READ ${INPUT} body)
string(FIND "${body}" ")sluice_text\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )sluice_text\"")
endif()
file(WRITE ${OUTPUT}.tmp
"// Generated from ${INPUT} by cmake/embed_text_file.cmake. Do not edit.
#include \"${HEADER}\"

namespace ${NAMESPACE} {
const std::string_view ${NAME}{R\"sluice_text(${body})sluice_text\"};
}  // namespace ${NAMESPACE}
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
