# Package tests (label `package`): install this build into a scratch prefix, then configure,
# build and run projects that consume Sluice the supported ways:
#   package.install           cmake --install into <build>/tests/package/prefix, check the layout
#   package.example_consumer  examples/consumer against that prefix (find_package)
#   package.find_package      tests/cmake/find_package against that prefix
#   package.core_only         tests/cmake/core_only: sluice::core alone, hiredis hidden
#   package.add_subdirectory  tests/cmake/add_subdirectory on this source tree
# Each configures and builds a real project, so they take seconds to a few minutes (the
# add_subdirectory one compiles the library again, unoptimised). Not run under sanitizers.
if(NOT SLUICE_INSTALL)
  return()
endif()

set(package_dir ${CMAKE_CURRENT_BINARY_DIR}/package)
set(package_prefix ${package_dir}/prefix)
set(package_programs "")
foreach(tool IN ITEMS sluice_cli sluiced)
  if(TARGET ${tool})
    list(APPEND package_programs $<TARGET_FILE_NAME:${tool}>)
  endif()
endforeach()

add_test(NAME package.install
  COMMAND ${CMAKE_COMMAND} -DBINARY_DIR=${PROJECT_BINARY_DIR} -DPREFIX=${package_prefix}
          -DCONFIG=$<CONFIG> -DLIBDIR=${CMAKE_INSTALL_LIBDIR} "-DPROGRAMS=${package_programs}"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/install_prefix.cmake)
set_tests_properties(package.install PROPERTIES FIXTURES_SETUP sluice_installed)

# sluice_consumer_test(<name> <project dir> <configure args...>)
function(sluice_consumer_test name project_dir)
  add_test(NAME package.${name}
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${project_dir} -DBINARY_DIR=${package_dir}/${name}
            -DGENERATOR=${CMAKE_GENERATOR} -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
            "-DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}" ${ARGN}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/run_consumer.cmake)
  set_tests_properties(package.${name} PROPERTIES LABELS package TIMEOUT 900)
endfunction()

sluice_consumer_test(example_consumer ${PROJECT_SOURCE_DIR}/examples/consumer
                     -DPREFIX_PATH=${package_prefix} "-DEXPECT=burst admitted, then limited")
sluice_consumer_test(find_package ${CMAKE_CURRENT_SOURCE_DIR}/cmake/find_package
                     -DPREFIX_PATH=${package_prefix})
sluice_consumer_test(core_only ${CMAKE_CURRENT_SOURCE_DIR}/cmake/core_only
                     -DPREFIX_PATH=${package_prefix} "-DEXPECT=burst admitted, then limited")
sluice_consumer_test(add_subdirectory ${CMAKE_CURRENT_SOURCE_DIR}/cmake/add_subdirectory
                     -DSLUICE_SOURCE_DIR=${PROJECT_SOURCE_DIR})
set_tests_properties(package.install PROPERTIES LABELS package TIMEOUT 300)
set_tests_properties(package.example_consumer package.find_package package.core_only
                     PROPERTIES FIXTURES_REQUIRED sluice_installed)
