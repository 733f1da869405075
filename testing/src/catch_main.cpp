#include "hla/testing/property.hpp"

int main(int argc, char* argv[]) {
  return hla::testing::run_catch(argc, argv);
}
