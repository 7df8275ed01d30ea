# The Envoy RLS integration tests (tests/integration/envoy_rls_test.cpp) talk to sluiced with
# Debian's python3-grpcio, which loads the messages protoc --python_out made from proto/.
if(TARGET sluice_integration_tests AND TARGET sluice_envoy_proto_python)
  add_dependencies(sluice_integration_tests sluice_envoy_proto_python)
  # Debian's interpreter, where python3-grpcio and python3-protobuf are installed (a
  # python3 earlier in PATH, e.g. pyenv's, does not have them).
  find_program(SLUICE_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(SLUICE_PYTHON3)
    target_compile_definitions(sluice_integration_tests PRIVATE
      SLUICE_PYTHON3="${SLUICE_PYTHON3}"
      SLUICE_ENVOY_PB_DIR="${SLUICE_ENVOY_PROTO_PYTHON_DIR}")
  endif()
elseif(NOT TARGET sluice_daemon)
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/integration/envoy_rls_test.cpp
                              PROPERTIES HEADER_FILE_ONLY ON)
endif()

# The HTTP/2 attack tests (envoy_rls_attack_test.cpp) build frames with nghttp2's HPACK
# encoder (support/h2_frames.hpp).
if(TARGET sluice_integration_tests AND TARGET PkgConfig::NGHTTP2)
  target_link_libraries(sluice_integration_tests PRIVATE PkgConfig::NGHTTP2)
endif()
