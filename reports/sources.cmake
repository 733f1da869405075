# The reports library's sources; HLA_CHECK_SOURCES are those `hla check` needs, which the Python
# module (python/CMakeLists.txt) also builds. Read by reports/CMakeLists.txt and python/.
set(HLA_CHECK_SOURCES src/arrays.cpp src/backward_bound.cpp src/candidates.cpp src/check.cpp src/check_grad.cpp
                      src/check_gpu.cpp)
set(HLA_REPORTS_SOURCES ${HLA_CHECK_SOURCES} src/audit.cpp src/gpu_candidates.cpp
                        src/error_report.cpp src/report_files.cpp)
list(TRANSFORM HLA_CHECK_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
list(TRANSFORM HLA_REPORTS_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
