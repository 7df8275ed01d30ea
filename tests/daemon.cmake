# The daemon's tests: unit tests link the sluice_daemon library (config, service, metrics);
# integration tests start the real sluiced binary and a real nginx.
if(TARGET sluice_daemon AND TARGET sluice_unit_tests)
  # sluice_envoy_grpc: a test checks the generated service's name (what Envoy calls).
  target_link_libraries(sluice_unit_tests PRIVATE sluice_daemon sluice_envoy_grpc)
endif()
# daemon_rls_routing_test drives the daemon's service in-process on a real Redis.
if(TARGET sluice_daemon AND TARGET sluice_integration_tests)
  target_link_libraries(sluice_integration_tests PRIVATE sluice_daemon)
endif()
if(TARGET sluiced)
  target_compile_definitions(sluice_test_support PRIVATE SLUICE_SLUICED_PATH="$<TARGET_FILE:sluiced>")
  if(TARGET sluice_integration_tests)
    add_dependencies(sluice_integration_tests sluiced)
  endif()
endif()
find_program(SLUICE_NGINX_EXECUTABLE nginx PATHS /usr/sbin /usr/local/sbin)
if(SLUICE_NGINX_EXECUTABLE)
  target_compile_definitions(sluice_test_support PRIVATE SLUICE_NGINX_PATH="${SLUICE_NGINX_EXECUTABLE}")
endif()
# Without the daemon (SLUICE_BUILD_TOOLS=OFF) its tests have nothing to test: leave them out
# of the (globbed) test binaries rather than fail to compile.
if(NOT TARGET sluice_daemon)
  file(GLOB daemon_tests CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/unit/daemon_*_test.cpp
       ${CMAKE_CURRENT_SOURCE_DIR}/integration/daemon_*_test.cpp
       ${CMAKE_CURRENT_SOURCE_DIR}/integration/nginx_*_test.cpp)
  set_source_files_properties(${daemon_tests} PROPERTIES HEADER_FILE_ONLY ON)
endif()

# The `sluice` command's tests run the built binary.
if(TARGET sluice_cli AND TARGET sluice_integration_tests)
  target_compile_definitions(sluice_integration_tests PRIVATE SLUICE_CLI_PATH="$<TARGET_FILE:sluice_cli>")
  add_dependencies(sluice_integration_tests sluice_cli)
elseif(NOT TARGET sluice_cli)
  file(GLOB cli_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/integration/cli_*_test.cpp)
  set_source_files_properties(${cli_tests} PROPERTIES HEADER_FILE_ONLY ON)
endif()
