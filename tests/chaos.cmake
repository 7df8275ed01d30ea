# The fault drill (tests/chaos): a program users run with scripts/chaos, and a short ctest
# run of it (label `chaos`) so CI keeps it honest.
add_executable(sluice_chaos_drill ${CMAKE_CURRENT_SOURCE_DIR}/chaos/chaos_drill.cpp)
target_link_libraries(sluice_chaos_drill PRIVATE sluice_test_support CLI11::CLI11
                                                  nlohmann_json::nlohmann_json sluice_warnings)
foreach(mode IN ITEMS open closed local)
  add_test(NAME chaos_drill_${mode}
           COMMAND sluice_chaos_drill --mode ${mode} --duration-s 6 --fault-every-ms 1500
                   --fault-length-ms 500 --check)
  set_tests_properties(chaos_drill_${mode} PROPERTIES LABELS "integration;chaos" RUN_SERIAL TRUE
                                                      TIMEOUT 120)
endforeach()
