# hla_fast's sources (the CPU ones): read by fast/CMakeLists.txt and by the fuzzers' own build.
set(HLA_FAST_SOURCES src/catalogue.cpp src/scan.cpp)
list(TRANSFORM HLA_FAST_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
