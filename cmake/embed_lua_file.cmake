# cmake -DNAME=n -DINPUT=file.lua -DPRELUDE=prelude.lua -DOUTPUT=file.cpp -P embed_lua_file.cmake
# The script is the prelude's text followed by the file's, byte for byte.
file(READ ${PRELUDE} prelude)
file(READ ${INPUT} script)
set(body "${prelude}${script}")
string(SHA1 sha "${body}")
string(FIND "${body}" ")sluice_lua\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )sluice_lua\"")
endif()
file(WRITE ${OUTPUT}.tmp
"// Generated from ${PRELUDE} and ${INPUT} by cmake/embed_lua_file.cmake. Do not edit.
#include \"redis/scripts.hpp\"

namespace sluice::detail {
const lua_script lua_${NAME}{R\"sluice_lua(${body})sluice_lua\", \"${sha}\"};
}  // namespace sluice::detail
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
