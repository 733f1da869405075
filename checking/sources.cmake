# hla_checking's sources: read by checking/CMakeLists.txt and by the fuzzers' own build.
set(HLA_CHECKING_SOURCES src/counted.cpp src/law_check.cpp)
list(TRANSFORM HLA_CHECKING_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
