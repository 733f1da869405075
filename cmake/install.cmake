# cmake --install build --prefix P installs the public headers, the libraries and the package:
# find_package(hla CONFIG) gives hla::reference (the number types, ModP and Gauge on host and
# device, sequences, the n x n definitions), hla::fast (the proven implementations), hla::gpu
# (the GPU kernels, in a CUDA build), hla::checking (the instrumented scalars, the laws),
# hla::reports (the check of `hla check` as a C++ API: hla/reports/check.hpp; hla::io beneath it)
# and, in a build with the tests, hla::testing (the property runner and generators over Catch2
# and RapidCheck, with hla::reports). The build folder exports the same targets, so hla_DIR may name it too. Relocatable:
# every installed path is relative to the prefix. docs/cpp.md.
include(CMakePackageConfigHelpers)
set(hla_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/hla)
set(hla_exported hla_warnings hla_reference hla_fast hla_checking hla_io hla_reports)
set(hla_header_parts reference fast checking io reports)
if(HLA_HAVE_CUDA)
  list(APPEND hla_exported hla_gpu hla_gpu_tensor_core)
endif()
if(HLA_BUILD_TESTS)
  list(APPEND hla_exported hla_testing_session)
  list(APPEND hla_header_parts testing)
endif()
foreach(target ${hla_exported})
  string(REGEX REPLACE "^hla_" "" name ${target})
  if(name STREQUAL "testing_session")
    set(name testing)
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  add_library(hla::${name} ALIAS ${target})
endforeach()

install(TARGETS ${hla_exported} EXPORT hla-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(part ${hla_header_parts})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${part}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(EXPORT hla-targets NAMESPACE hla:: DESTINATION ${hla_package_dir})
export(EXPORT hla-targets NAMESPACE hla:: FILE ${PROJECT_BINARY_DIR}/hla-targets.cmake)

set(HLA_PACKAGE_GPU ${HLA_HAVE_CUDA})
set(HLA_PACKAGE_TESTING ${HLA_BUILD_TESTS})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/hla-config.cmake.in ${PROJECT_BINARY_DIR}/hla-config.cmake
                              INSTALL_DESTINATION ${hla_package_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hla-config-version.cmake COMPATIBILITY SameMinorVersion)
configure_file(${CMAKE_CURRENT_LIST_DIR}/hla-dependencies.cmake ${PROJECT_BINARY_DIR}/hla-dependencies.cmake
               COPYONLY)
install(FILES ${PROJECT_BINARY_DIR}/hla-config.cmake ${PROJECT_BINARY_DIR}/hla-config-version.cmake
              ${CMAKE_CURRENT_LIST_DIR}/hla-dependencies.cmake DESTINATION ${hla_package_dir})
