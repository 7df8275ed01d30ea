# Configures, builds and runs a consumer project; a ctest test runs it with `cmake -P`.
#   -DSOURCE_DIR=<consumer project> -DBINARY_DIR=<scratch build dir, wiped first>
#   -DGENERATOR=... -DCXX_COMPILER=... [-DLAUNCHER=ccache] [-DPREFIX_PATH=<install prefix>]
#   [-DSLUICE_SOURCE_DIR=<checkout>] [-DEXPECT=<regex the program's output must match>]
# Every step's output is shown, so a failing test says which step broke and why.
foreach(var SOURCE_DIR BINARY_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake needs -D${var}=...")
  endif()
endforeach()

function(step what)
  message(STATUS "${what}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc})")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${BINARY_DIR})
set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR}
              -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(PREFIX_PATH)
  # Only the given prefix: the consumer must not find Sluice's build tree by accident.
  list(APPEND configure -DCMAKE_PREFIX_PATH=${PREFIX_PATH} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
endif()
if(SLUICE_SOURCE_DIR)
  list(APPEND configure -DSLUICE_SOURCE_DIR=${SLUICE_SOURCE_DIR})
endif()
step(configure ${configure})
step(build ${CMAKE_COMMAND} --build ${BINARY_DIR})
step(run ${BINARY_DIR}/consumer)
if(DEFINED EXPECT AND NOT step_output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the consumer's output does not match '${EXPECT}'")
endif()
