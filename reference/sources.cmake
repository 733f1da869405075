# hla_reference's sources: read by reference/CMakeLists.txt and by the fuzzers' own build (fuzz/harness).
set(HLA_REFERENCE_SOURCES src/scalar.cpp src/operator_spec.cpp src/random.cpp src/memory.cpp)
list(TRANSFORM HLA_REFERENCE_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
