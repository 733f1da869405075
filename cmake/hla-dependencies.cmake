# What hla's libraries need, found once for the build (CMakeLists.txt) and again for a project that
# uses the installed package (hla-config.cmake), so that both link the same way: Boost (its
# multiprecision headers), Eigen, OpenMP, and GMP and MPFR as the imported targets hla::gmp and
# hla::mpfr. HLA_PACKAGE_GPU and HLA_PACKAGE_TESTING add CUDA's runtime and Catch2 + RapidCheck.
include(CMakeFindDependencyMacro)
macro(hla_find_dependency)
  if(HLA_FINDING_PACKAGE)
    find_dependency(${ARGN})
  else()
    find_package(${ARGN} REQUIRED)
  endif()
endmacro()

hla_find_dependency(Boost 1.74)
hla_find_dependency(Eigen3 3.4 NO_MODULE)
hla_find_dependency(OpenMP)
foreach(lib gmp mpfr)
  if(NOT TARGET hla::${lib})
    string(TOUPPER ${lib} name)
    find_library(${name}_LIBRARY ${lib} REQUIRED)
    find_path(${name}_INCLUDE_DIR ${lib}.h REQUIRED)
    add_library(hla::${lib} UNKNOWN IMPORTED)
    set_target_properties(hla::${lib} PROPERTIES IMPORTED_LOCATION "${${name}_LIBRARY}"
                                                 INTERFACE_INCLUDE_DIRECTORIES "${${name}_INCLUDE_DIR}")
  endif()
endforeach()
if(HLA_PACKAGE_GPU)
  hla_find_dependency(CUDAToolkit)
endif()
if(HLA_PACKAGE_TESTING)
  hla_find_dependency(Catch2 2)
  hla_find_dependency(rapidcheck)
endif()
