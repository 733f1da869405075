# hla_io's sources: read by io/CMakeLists.txt and by the fuzzers' own build (fuzz/harness).
set(HLA_IO_SOURCES ${CMAKE_CURRENT_LIST_DIR}/src/npy.cpp ${CMAKE_CURRENT_LIST_DIR}/src/files.cpp
                   ${CMAKE_CURRENT_LIST_DIR}/src/interrupt.cpp)
