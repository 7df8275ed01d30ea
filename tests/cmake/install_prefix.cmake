# Installs a Sluice build tree into a fresh prefix and checks the layout a user relies on.
#   cmake -DBINARY_DIR=<build tree> -DPREFIX=<prefix, wiped first> -DCONFIG=<build type>
#         -DLIBDIR=<lib dir relative to the prefix> [-DPROGRAMS=sluice;sluiced] -P install_prefix.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${PREFIX} --config ${CONFIG}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()

set(expected include/sluice/sluice.hpp include/sluice/version.hpp
             ${LIBDIR}/cmake/sluice/sluiceConfig.cmake ${LIBDIR}/cmake/sluice/sluiceConfigVersion.cmake
             ${LIBDIR}/cmake/sluice/sluice-core-targets.cmake
             ${LIBDIR}/cmake/sluice/sluice-redis-targets.cmake
             ${LIBDIR}/cmake/sluice/sluice-http-targets.cmake
             ${LIBDIR}/cmake/sluice/sluice-all-targets.cmake)
foreach(program IN LISTS PROGRAMS)
  list(APPEND expected bin/${program})
endforeach()
foreach(f IN LISTS expected)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "${PREFIX}/${f} was not installed")
  endif()
endforeach()
foreach(component IN ITEMS core redis http)
  file(GLOB libraries ${PREFIX}/${LIBDIR}/libsluice_${component}.*)
  if(NOT libraries)
    message(FATAL_ERROR "no libsluice_${component} in ${PREFIX}/${LIBDIR}")
  endif()
endforeach()
# Private headers stay private: the package ships include/sluice/ only.
file(GLOB_RECURSE stray RELATIVE ${PREFIX}/include ${PREFIX}/include/*)
list(FILTER stray EXCLUDE REGEX "^sluice/")
if(stray)
  message(FATAL_ERROR "installed outside include/sluice/: ${stray}")
endif()
# Only the public API: no internals under a detail/ directory (#32 item 7).
if(EXISTS ${PREFIX}/include/sluice/detail)
  message(FATAL_ERROR "${PREFIX}/include/sluice/detail was installed: internals are not API")
endif()
message(STATUS "installed into ${PREFIX}: ${expected}")
