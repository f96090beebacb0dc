// Catch2 entry point for the host tests (run everywhere, CI included).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
