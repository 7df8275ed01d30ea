# Adds the label `concurrency` to the integration tests about concurrency, so the TSan preset
# can run `unit` + `concurrency` (see CMakePresets.json). An integration test is one when its
# gtest name contains "Concurren" or "Atomic" (e.g. RedisAtomicityTest.*,
# *.ConcurrentCallersOnOneKey*). Test names exist only once gtest_discover_tests has listed
# them, so the label is set by a script ctest includes after the discovered tests.
set(concurrency_label_script ${CMAKE_CURRENT_BINARY_DIR}/concurrency_label.cmake)
file(WRITE ${concurrency_label_script} [=[
foreach(test_name IN LISTS sluice_integration_tests_TESTS)
  if(test_name MATCHES "[Cc]oncurren|[Aa]tomic")
    set_tests_properties("${test_name}" PROPERTIES LABELS "integration;concurrency")
  endif()
endforeach()
]=])
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${concurrency_label_script})
