# Debian packages, made with CPack by scripts/package from the release build:
#   sluiced        /usr/bin/sluiced, the conffile /etc/sluice/sluiced.yaml, the systemd unit,
#                  the system user sluice (sysusers.d, created by postinst), sluiced(8)
#   sluice-tools   /usr/bin/sluice, sluice(1). Not called `sluice`: Debian has a package of
#                  that name (a pipe rate limiter, versioned above ours) that ships
#                  /usr/bin/sluice too, hence Conflicts: sluice.
#   libsluice-dev  the headers, the static libraries, the CMake package and sluice.pc
# Install components: `daemon`, `tools` and `dev`. What only a package installs (files under
# /etc and /lib, /usr/share/doc, lintian overrides) is EXCLUDE_FROM_ALL, so
# `cmake --install --prefix DIR` never writes outside DIR. The man pages and sluice.pc are
# installed by both. Included by the top CMakeLists when SLUICE_INSTALL is on.
set(SLUICE_DEB_REVISION 1 CACHE STRING "Debian revision of the packages (version-REVISION)")
set(SLUICE_MAINTAINER "Sluice maintainers <maintainers@users.noreply.a-seed-9075e35f.example>")
set(sluice_packaging ${PROJECT_SOURCE_DIR}/packaging)
set(sluice_package_build ${PROJECT_BINARY_DIR}/packaging)

# Man pages, written in roff in docs/man/, versioned here and compressed at build time
# (gzip -9n: no name or time stamp, so the same page gives the same bytes).
find_program(SLUICE_GZIP gzip REQUIRED)
set(sluice_compressed "")
# sluice_compressed_file(<out .gz> <input>): appends <out> to sluice_compressed.
function(sluice_compressed_file out in)
  add_custom_command(OUTPUT ${out}
    COMMAND sh -c "\"$1\" -9n -c \"$2\" > \"$3\"" sh ${SLUICE_GZIP} ${in} ${out}
    DEPENDS ${in}
    COMMENT "Compressing ${in}"
    VERBATIM)
  set(sluice_compressed ${sluice_compressed} ${out} PARENT_SCOPE)
endfunction()
foreach(page IN ITEMS sluice.1 sluiced.8)
  configure_file(${PROJECT_SOURCE_DIR}/docs/man/${page}.in ${sluice_package_build}/man/${page} @ONLY)
  sluice_compressed_file(${sluice_package_build}/man/${page}.gz ${sluice_package_build}/man/${page})
endforeach()

# changelog.Debian: one entry for this version. Its date honours SOURCE_DATE_EPOCH.
string(TIMESTAMP sluice_changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(pkg IN ITEMS sluiced sluice-tools libsluice-dev)
  file(CONFIGURE OUTPUT ${sluice_package_build}/${pkg}/changelog.Debian @ONLY CONTENT
"${pkg} (${PROJECT_VERSION}-${SLUICE_DEB_REVISION}) unstable; urgency=medium

  * Sluice ${PROJECT_VERSION}, packaged from its source tree with CPack.

 -- ${SLUICE_MAINTAINER}  ${sluice_changelog_date}
")
  sluice_compressed_file(${sluice_package_build}/${pkg}/changelog.Debian.gz
                         ${sluice_package_build}/${pkg}/changelog.Debian)
endforeach()
add_custom_target(sluice_package_files ALL DEPENDS ${sluice_compressed})

# sluice_package_docs(<component> <package>): copyright, changelog and lintian overrides.
function(sluice_package_docs component pkg)
  install(FILES ${sluice_packaging}/debian/copyright
                ${sluice_package_build}/${pkg}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${pkg}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  if(EXISTS ${sluice_packaging}/debian/${pkg}.lintian-overrides)
    install(FILES ${sluice_packaging}/debian/${pkg}.lintian-overrides
            DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ${pkg}
            COMPONENT ${component} EXCLUDE_FROM_ALL)
  endif()
endfunction()

# libsluice-dev: sluice.pc, written at install time with the prefix being installed to (the
# packages' /usr, or cmake --install --prefix DIR), so its -I and -L are never guessed.
foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(SLUICE_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(SLUICE_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
set(SLUICE_PC_PREFIX @SLUICE_PC_PREFIX@)  # filled in at install time
configure_file(${sluice_packaging}/sluice.pc.in ${sluice_package_build}/sluice.pc.in @ONLY)
set(sluice_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(CODE "
  set(SLUICE_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${sluice_pc_dir}/sluice.pc\")
  message(STATUS \"Installing: \${pc}\")
  configure_file(\"${sluice_package_build}/sluice.pc.in\" \"\${pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${pc}\")
" COMPONENT dev)
sluice_package_docs(dev libsluice-dev)

if(TARGET sluice_cli)
  install(FILES ${sluice_package_build}/man/sluice.1.gz
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
  sluice_package_docs(tools sluice-tools)
endif()

if(TARGET sluiced)
  install(FILES ${sluice_package_build}/man/sluiced.8.gz
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT daemon)
  # Absolute paths: Debian's places, whatever the prefix (bookworm's units live in /lib).
  install(FILES ${sluice_packaging}/sluiced.yaml DESTINATION /etc/sluice
          COMPONENT daemon EXCLUDE_FROM_ALL)
  install(FILES ${sluice_packaging}/sluiced.service DESTINATION /lib/systemd/system
          COMPONENT daemon EXCLUDE_FROM_ALL)
  install(FILES ${sluice_packaging}/sluiced.sysusers DESTINATION ${CMAKE_INSTALL_LIBDIR}/sysusers.d
          RENAME sluiced.conf COMPONENT daemon EXCLUDE_FROM_ALL)
  # Prometheus alerting rules and a Grafana dashboard, as they are tested (docs/monitoring.md).
  install(FILES ${sluice_packaging}/monitoring/sluice-alerts.yml
                ${sluice_packaging}/monitoring/sluice-dashboard.json
          DESTINATION ${CMAKE_INSTALL_DATADIR}/sluice COMPONENT daemon)
  # The HTTP API's OpenAPI 3.1 document, also served at GET /openapi.json.
  install(FILES ${sluice_packaging}/openapi/sluiced.openapi.json
          DESTINATION ${CMAKE_INSTALL_DATADIR}/sluice COMPONENT daemon)
  sluice_package_docs(daemon sluiced)
endif()

# CPack: one .deb per component, installed under /usr (DESTDIR staging, so the absolute
# destinations above land in the package and nowhere else).
get_target_property(sluice_library_type sluice_core TYPE)
if(NOT sluice_library_type STREQUAL "STATIC_LIBRARY")
  # The tools link libsluice statically and libsluice-dev ships libsluice.a; a shared build
  # would need a runtime library package as well.
  message(STATUS "Debian packages: not defined for a shared libsluice")
  return()
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VENDOR "Sluice")
set(CPACK_PACKAGE_CONTACT "${SLUICE_MAINTAINER}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's description below starts with its own synopsis line; a global summary would
# be put in front of it.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${SLUICE_DEB_REVISION})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${SLUICE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Runtime dependencies are computed from the binaries (dpkg-shlibdeps, from dpkg-dev) and
# added to the hand-written ones below, which no tool can see.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsluice-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What the CMake package and sluice.pc find: the link interface of the static libraries
# (core: fmt, threads; redis: hiredis, OpenSSL) and the Boost.Asio headers.
# The paragraph every package's description starts with.
set(sluice_deb_summary "Sluice decides whether a caller may spend N tokens now in one atomic step
(token bucket, GCRA, sliding window log or counter, fixed window): a Lua
script inside Redis (standalone, Cluster or Sentinel, optionally over TLS)
that reads the Redis clock, or the same math in process memory.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libboost-dev (>= 1.74), libhiredis-dev, libfmt-dev, libssl-dev, pkg-config")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "cmake, libcpp-httplib-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION "distributed rate limiter that cannot race - development files
${sluice_deb_summary}
.
This package holds the C++20 headers, the static libraries (libsluice_core.a,
libsluice_redis.a, libsluice_http.a), the CMake package (find_package(sluice),
targets sluice::sluice, sluice::core, sluice::redis, sluice::http) and
sluice.pc for pkg-config.")

if(TARGET sluice_cli)
  list(APPEND CPACK_COMPONENTS_ALL tools)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME sluice-tools)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
  set(CPACK_DEBIAN_TOOLS_PACKAGE_CONFLICTS sluice)
  set(CPACK_COMPONENT_TOOLS_DESCRIPTION "distributed rate limiter that cannot race - command-line tool
${sluice_deb_summary}
.
This package holds the sluice command: one decision (or several) printed as
JSON lines, with the exit status saying allowed or denied; the key operations
peek, reset, refund, penalize and block; and a simulator that runs a policy
against synthetic traffic and draws it as SVG.")
endif()

if(TARGET sluiced)
  list(APPEND CPACK_COMPONENTS_ALL daemon)
  set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME sluiced)
  set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION net)
  # postinst creates the user with adduser (systemd-sysusers where systemd is installed);
  # the unit's ExecReload runs /bin/kill (procps).
  set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "adduser, procps")
  set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "sluice-tools, redis-server")
  set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
      ${sluice_packaging}/debian/sluiced/conffiles
      ${sluice_packaging}/debian/sluiced/postinst
      ${sluice_packaging}/debian/sluiced/prerm
      ${sluice_packaging}/debian/sluiced/postrm)
  set(CPACK_COMPONENT_DAEMON_DESCRIPTION "distributed rate limiter that cannot race - HTTP daemon
${sluice_deb_summary}
.
sluiced answers over HTTP: POST /v1/check and /v1/peek as JSON, admin
endpoints behind a bearer token (reset, refund, penalize, block), /v1/auth as
forward-auth for nginx auth_request, Traefik forwardAuth and Envoy ext_authz,
/metrics for Prometheus, and /healthz and /readyz. It reloads its YAML
configuration on SIGHUP and drains on SIGTERM. The package runs it as a
hardened systemd service on 127.0.0.1:8080 with the in-memory backend;
/etc/sluice/sluiced.yaml has commented examples for Redis, Redis Cluster and
forward-auth.")
endif()

include(CPack)
