# package.deb (label `package`): the Debian packages end to end, in
# tests/package/deb_install_test.sh: CPack builds them from this build tree, dpkg-deb and
# lintian check them, dpkg --root installs them into a throwaway root under
# <build>/tests/package/deb (never the host's /usr or /etc), sluiced runs there from the
# unit's ExecStart and answers /v1/check, the conffile survives removal and goes on purge,
# and systemd-analyze checks the unit. Needs dpkg-dev, lintian and systemd
# (scripts/debian-packages.txt). Not run under sanitizers.
if(NOT SLUICE_INSTALL OR NOT TARGET sluiced OR NOT TARGET sluice_cli)
  return()
endif()
find_program(SLUICE_BASH bash REQUIRED)
add_test(NAME package.deb
  COMMAND ${SLUICE_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/package/deb_install_test.sh
          --source ${PROJECT_SOURCE_DIR} --build ${PROJECT_BINARY_DIR}
          --work ${CMAKE_CURRENT_BINARY_DIR}/package/deb --cpack ${CMAKE_CPACK_COMMAND}
          --version ${PROJECT_VERSION} --cxx ${CMAKE_CXX_COMPILER})
set_tests_properties(package.deb PROPERTIES LABELS package TIMEOUT 300)
