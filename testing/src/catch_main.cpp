#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "hla/testing/property.hpp"

int main(int argc, char* argv[]) {
  hla::testing::set_program_name(argc > 0 ? argv[0] : "test");
  return Catch::Session().run(argc, argv);
}
