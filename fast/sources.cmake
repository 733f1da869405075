# hla_fast's sources (the CPU ones): read by fast/CMakeLists.txt and by the fuzzers' own build.
set(HLA_FAST_SOURCES src/catalogue.cpp src/scan.cpp src/slices.cpp)
# The drivers' instantiations (backward.hpp), one unit per scalar: the forward ones for hla_fast and
# the Python module; the backward's floating ones for both, the exact ones for hla_fast only; the
# fuzzers run no driver.
set(HLA_FAST_FORWARD_SOURCES src/forward_float.cpp src/forward_double.cpp src/forward_mpfr.cpp
    src/forward_rational.cpp src/forward_modp.cpp)
set(HLA_FAST_BACKWARD_SOURCES src/backward_float.cpp src/backward_double.cpp src/backward_mpfr.cpp)
set(HLA_FAST_EXACT_BACKWARD_SOURCES src/backward_rational.cpp src/backward_modp.cpp)
# The sequence-parallel drivers (ranks.hpp), for hla_fast only.
set(HLA_FAST_RANKS_SOURCES src/ranks_float.cpp src/ranks_double.cpp src/ranks_modp.cpp)
foreach(list HLA_FAST_SOURCES HLA_FAST_FORWARD_SOURCES HLA_FAST_BACKWARD_SOURCES HLA_FAST_EXACT_BACKWARD_SOURCES
        HLA_FAST_RANKS_SOURCES)
  list(TRANSFORM ${list} PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
endforeach()
