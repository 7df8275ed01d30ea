# Warnings live on a private options target, never in CMAKE_CXX_FLAGS, so consumers of the
# installed package do not inherit them.
add_library(sluice_warnings INTERFACE)
target_compile_options(sluice_warnings INTERFACE -Wall -Wextra -Wpedantic
                       $<$<BOOL:${SLUICE_WERROR}>:-Werror>)
# GCC 12 (Debian 12) reports -Wrestrict false positives for std::string concatenation once
# inlined at -O2/-O3 (GCC bug 105329, fixed in 13), which would break Release builds only.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(sluice_warnings INTERFACE -Wno-restrict)
endif()
# Boost.Asio's fenced blocks use std::atomic_thread_fence, which GCC 12 warns ThreadSanitizer
# does not model (-Wtsan); that is Asio's business, not ours, and it must not fail TSan builds.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_FLAGS MATCHES "-fsanitize=thread")
  target_compile_options(sluice_warnings INTERFACE -Wno-tsan)
endif()
