# The Envoy RLS config and matching tests (tests/unit/envoy_*_test.cpp) link sluice_envoy.
if(TARGET sluice_envoy AND TARGET sluice_unit_tests)
  target_link_libraries(sluice_unit_tests PRIVATE sluice_envoy)
endif()
