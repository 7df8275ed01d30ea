# Compile through ccache when it is installed. The presets include this file at the first
# project() call (CMAKE_PROJECT_TOP_LEVEL_INCLUDES), so a plain `cmake -S . -B b` is not
# affected and an explicit -DCMAKE_CXX_COMPILER_LAUNCHER=... always wins.
if(NOT DEFINED CMAKE_CXX_COMPILER_LAUNCHER AND NOT DEFINED ENV{CMAKE_CXX_COMPILER_LAUNCHER})
  find_program(SLUICE_CCACHE_PROGRAM ccache)
  if(SLUICE_CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${SLUICE_CCACHE_PROGRAM}
        CACHE STRING "Compiler launcher (ccache when installed)")
  endif()
endif()
