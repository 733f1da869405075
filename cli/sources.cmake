# The command line's sources: its definition (parsing only, which the cli fuzzer builds too) and
# the commands it runs. Read by cli/CMakeLists.txt and by the fuzzers' own build.
set(HLA_COMMAND_SOURCES src/command.cpp)
set(HLA_CLI_SOURCES src/check.cpp src/eval.cpp src/fuzz.cpp)
list(TRANSFORM HLA_COMMAND_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
list(TRANSFORM HLA_CLI_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
