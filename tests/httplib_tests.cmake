# tests/httplib/*_test.cpp -> sluice_httplib_tests: the cpp-httplib adapter against a real
# httplib::Server on loopback (label integration). Only where cpp-httplib is installed
# (Debian: libcpp-httplib-dev), as examples/httplib.
find_package(PkgConfig REQUIRED)
pkg_check_modules(sluice_tests_cpp_httplib IMPORTED_TARGET cpp-httplib)
if(sluice_tests_cpp_httplib_FOUND)
  sluice_test_binary(sluice_httplib_tests integration TRUE
                     ${CMAKE_CURRENT_SOURCE_DIR}/httplib/*_test.cpp
                     PkgConfig::sluice_tests_cpp_httplib)
endif()
