# Warnings live on a private options target, never in CMAKE_CXX_FLAGS, so consumers of the
# installed package do not inherit them.
add_library(sluice_warnings INTERFACE)
target_compile_options(sluice_warnings INTERFACE -Wall -Wextra -Wpedantic
                       $<$<BOOL:${SLUICE_WERROR}>:-Werror>)
