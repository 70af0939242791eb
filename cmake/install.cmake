# SPDX-License-Identifier: Apache-2.0
# Installing pav's libraries for other CMake projects: `cmake --install` puts
# the static libraries, their headers and a package config under the prefix,
# so find_package(pav) gives pav::kernels, pav::reference, pav::stats and
# pav::input (cmake/pavConfig.cmake.in). ci/install-test.sh builds a consumer
# against an installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PAV_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/pav)
set(PAV_INSTALLED_LIBRARIES pav_kernels pav_reference pav_stats pav_input)
foreach(target ${PAV_INSTALLED_LIBRARIES})
  string(REGEX REPLACE "^pav_" "" export_name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  # In the tree every target sees the repository root; installed, the headers
  # keep their folders under include/pav.
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/pav>
                                                 $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()

install(TARGETS ${PAV_INSTALLED_LIBRARIES} EXPORT pavTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# Public headers of those areas; tests' helpers and the GPU sources stay out.
foreach(area kernels reference stats input)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${area}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pav/${area}
    FILES_MATCHING PATTERN "*.hpp"
    PATTERN "*_test*" EXCLUDE PATTERN "test_*" EXCLUDE PATTERN "hip" EXCLUDE)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/pav/kernel_abi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pav)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/pav)

install(EXPORT pavTargets NAMESPACE pav:: DESTINATION ${PAV_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pavConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/pavConfig.cmake INSTALL_DESTINATION ${PAV_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the interface.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pavConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pavConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/pavConfigVersion.cmake
  DESTINATION ${PAV_INSTALL_CMAKEDIR})

# Not under the sanitizers: the consumer would need their runtime too, and the
# installed interface is the same either way.
if(PAV_BUILD_TESTS AND NOT PAV_SANITIZE)
  add_test(NAME Install.FindPackageConsumerBuilds
    COMMAND bash ${PROJECT_SOURCE_DIR}/ci/install-test.sh ${CMAKE_BINARY_DIR} ${PROJECT_VERSION}
            ${CMAKE_BINARY_DIR}/install-test)
  set_tests_properties(Install.FindPackageConsumerBuilds PROPERTIES LABELS cpu TIMEOUT 300)
endif()
