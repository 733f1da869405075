# hla_fast's sources (the CPU ones): read by fast/CMakeLists.txt and by the fuzzers' own build.
set(HLA_FAST_SOURCES src/catalogue.cpp src/scan.cpp)
# The backward's instantiations (backward.hpp), one unit per scalar: the floating ones for hla_fast
# and the Python module, the exact ones for hla_fast only; the fuzzers differentiate nothing.
set(HLA_FAST_BACKWARD_SOURCES src/backward_float.cpp src/backward_double.cpp src/backward_mpfr.cpp)
set(HLA_FAST_EXACT_BACKWARD_SOURCES src/backward_rational.cpp src/backward_modp.cpp)
foreach(list HLA_FAST_SOURCES HLA_FAST_BACKWARD_SOURCES HLA_FAST_EXACT_BACKWARD_SOURCES)
  list(TRANSFORM ${list} PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
endforeach()
