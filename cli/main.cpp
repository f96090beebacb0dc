// The thin dpbench executable: everything lives in dpbench_core (cli/app.cpp).
#include "cli/app.h"

int main(int argc, char* argv[]) {
  return dpbench::dpbench_main(std::vector<std::string>(argv + 1, argv + argc));
}
