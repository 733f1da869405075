# hla_checking's sources: read by checking/CMakeLists.txt and by the fuzzers' own build.
set(HLA_CHECKING_SOURCES src/counted.cpp src/law_check.cpp)
# The drivers on the instrumented scalars (hla/checking/instances.hpp): hla_checking and the Python
# module; the fuzzers run no driver.
set(HLA_CHECKING_BACKWARD_SOURCES src/forward_gauge.cpp src/forward_depth24.cpp src/forward_depth53.cpp
    src/backward_gauge.cpp src/backward_depth24.cpp src/backward_depth53.cpp)
foreach(list HLA_CHECKING_SOURCES HLA_CHECKING_BACKWARD_SOURCES)
  list(TRANSFORM ${list} PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
endforeach()
