#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "hla/testing/property.hpp"

namespace hla::testing {

int run_catch(int argc, char* argv[]) {
  set_program_name(argc > 0 ? argv[0] : "test");
  return Catch::Session().run(argc, argv);
}

}  // namespace hla::testing
