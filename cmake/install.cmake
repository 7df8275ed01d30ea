# Installs the library's components, their headers and a relocatable CMake package, so another
# project can `find_package(sluice [COMPONENTS core redis http])` and link `sluice::sluice` (all)
# or one component. The tools install themselves (cli/, daemon/). Included by the top
# CMakeLists when SLUICE_INSTALL is on. All of it is the install component `dev` (the
# libsluice-dev package, cmake/package.cmake).
include(CMakePackageConfigHelpers)

set(SLUICE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/sluice
    CACHE STRING "Where sluiceConfig.cmake is installed, relative to the prefix")

# One export set per component: sluiceConfig.cmake loads only the requested ones, so asking
# for `core` needs none of the Redis component's dependencies (hiredis, OpenSSL).
foreach(component IN ITEMS core redis http)
  install(TARGETS sluice_${component}
    EXPORT sluice-${component}-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev
    FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
  install(EXPORT sluice-${component}-targets
    NAMESPACE sluice::
    FILE sluice-${component}-targets.cmake
    DESTINATION ${SLUICE_INSTALL_CMAKEDIR}
    COMPONENT dev)
endforeach()
install(TARGETS sluice
  EXPORT sluice-all-targets
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT sluice-all-targets
  NAMESPACE sluice::
  FILE sluice-all-targets.cmake
  DESTINATION ${SLUICE_INSTALL_CMAKEDIR}
  COMPONENT dev)

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/sluiceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sluiceConfig.cmake
  INSTALL_DESTINATION ${SLUICE_INSTALL_CMAKEDIR})
# find_package(sluice 0.1) accepts 0.1 and later 0.y, never 1.x.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)

install(FILES ${PROJECT_BINARY_DIR}/sluiceConfig.cmake
              ${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
        DESTINATION ${SLUICE_INSTALL_CMAKEDIR}
        COMPONENT dev)
