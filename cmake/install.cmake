# cmake --install: kiln's headers (under include/kiln, as the source tree lays them out), its
# libraries (the eager kernels as one archive), the `kiln` program, and a versioned CMake package:
# find_package(kiln 0.1) gives kiln::kiln, kiln::runtime, kiln_add_model() and kiln_add_cuda_kernels(). tests/install/ builds a program and an
# ahead-of-time model against an installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
set_target_properties(kiln_defs PROPERTIES EXPORT_NAME defs)
set_target_properties(kiln_defs_runtime PROPERTIES EXPORT_NAME defs_runtime)
set_target_properties(kiln_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(kiln_eager_kernels PROPERTIES EXPORT_NAME eager_kernels)
install(TARGETS kiln kiln_runtime kiln_defs kiln_defs_runtime kiln_eager_kernels EXPORT kilnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
install(FILES ${PROJECT_BINARY_DIR}/include/dsl/unary_functions.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/dsl)
foreach (layer dsl autograd graph schedules aot)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln
          FILES_MATCHING PATTERN "*.h")
endforeach ()

install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kilnConfig.cmake.in ${PROJECT_BINARY_DIR}/kilnConfig.cmake
                              INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/kiln_add_model.cmake ${CMAKE_CURRENT_LIST_DIR}/kiln_cuda_kernels.cmake
        DESTINATION ${KILN_INSTALL_CMAKEDIR})
