# The third-party headers that most units parse, precompiled (docs/perf.md, "CI's time": Eigen and
# Boost.Multiprecision are about 7 s of a library unit's compile, with Catch2 and RapidCheck about 5 s
# of a test unit's that they save). Each set is built once for a group of targets that compile
# alike (CMakeLists.txt names them); the build's own headers are not in them, so changing one
# rebuilds no precompiled header. Where a compiler cannot use one, it reads the headers
# as text (-Winvalid-pch says so), so a build never depends on them for its result.
option(HLA_PRECOMPILE_HEADERS "Precompile the third-party headers that most units include" ON)
set(HLA_LIBRARY_HEADERS <Eigen/Core> <boost/multiprecision/eigen.hpp> <boost/multiprecision/gmp.hpp>
                        <boost/multiprecision/mpfr.hpp>)
set(HLA_TEST_HEADERS ${HLA_LIBRARY_HEADERS} <catch2/catch.hpp> <rapidcheck.h>)

# hla_precompile_headers(headers first [target...]): `headers` (HLA_LIBRARY_HEADERS or HLA_TEST_HEADERS)
# precompiled for `first` and reused by the other targets. They compile with first's flags and define
# every macro that first defines: GCC uses a precompiled header only there (elsewhere -Winvalid-pch
# says why), so `first` defines none of its own.
function(hla_precompile_headers headers first)
  if(NOT HLA_PRECOMPILE_HEADERS)
    return()
  endif()
  target_precompile_headers(${first} PRIVATE ${${headers}})
  foreach(target ${ARGN})
    target_precompile_headers(${target} REUSE_FROM ${first})
  endforeach()
endfunction()
