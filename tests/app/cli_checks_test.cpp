// The command-line checks every binary shares: only plain decimal integers in range get through,
// rewritten canonically, and every refusal names the value and the range.
#include <catch2/catch.hpp>

#include "app/cli_checks.h"

using namespace psched;

TEST_CASE("an unsigned option takes plain decimal integers in its range, canonically", "[cli]") {
  CHECK(*cli::parse_unsigned("0", 0, 10) == 0);
  CHECK(*cli::parse_unsigned("+7", 0, 10) == 7);
  CHECK(*cli::parse_unsigned("010", 0, 10) == 10);  // decimal, never octal
  CHECK(*cli::parse_unsigned("18446744073709551615", 0, UINT64_MAX) == UINT64_MAX);
}

TEST_CASE("an unsigned option refuses negatives, overflow and non-integers, naming value and range",
          "[cli]") {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"-1", "-1 is out of range; expected an integer from 0 to 18446744073709551615"},
                        Case{"-0x1", "'-0x1' is not a decimal integer"},
                        Case{"18446744073709551616", "18446744073709551616 is out of range"},
                        Case{"99999999999999999999999999999999999999999", "is out of range"},
                        Case{"0x10", "'0x10' is not a decimal integer"},
                        Case{"1e3", "'1e3' is not a decimal integer"},
                        Case{" 5", "' 5' is not a decimal integer"},
                        Case{"", "'' is not a decimal integer"},
                        Case{"-", "'-' is not a decimal integer"}}) {
    auto v = cli::parse_unsigned(c.text, 0, UINT64_MAX);
    INFO(c.text << " -> " << v.message());
    CHECK_FALSE(v);
    CHECK(v.message().find(c.says) != std::string::npos);
  }
  auto low = cli::parse_unsigned("0", 1, 1024);
  CHECK(low.message() == "0 is out of range; expected an integer from 1 to 1024");
}

TEST_CASE("a signed option takes the whole 64-bit range and nothing past it", "[cli]") {
  CHECK(*cli::parse_signed("-9223372036854775808", INT64_MIN, INT64_MAX) == INT64_MIN);
  CHECK(*cli::parse_signed("-7", INT64_MIN, INT64_MAX) == -7);
  CHECK_FALSE(cli::parse_signed("-9223372036854775809", INT64_MIN, INT64_MAX));
  CHECK_FALSE(cli::parse_signed("9223372036854775808", INT64_MIN, INT64_MAX));
}

TEST_CASE("a negative index counts from the end, and one before the start is refused", "[cli]") {
  CHECK(*cli::from_end(-7, 100) == 93);
  CHECK(*cli::from_end(-100, 100) == 0);
  CHECK(*cli::from_end(5, 100) == 5);
  CHECK(*cli::from_end(500, 100) == 500);  // validate() refuses it, naming the axis
  auto before = cli::from_end(-101, 100);
  CHECK_FALSE(before);
  CHECK(before.message().find("expected -100 or more") != std::string::npos);
  CHECK_FALSE(cli::from_end(INT64_MIN, 100));
}

TEST_CASE("CLI11 options refuse bad values through the transform, naming the option", "[cli]") {
  uint64_t seed = 0;
  CLI::App app;
  app.add_option("--seed", seed)->transform(cli::unsigned_in(0, UINT64_MAX));
  std::string address;
  app.add_option("--scheduler", address)->check(cli::non_empty());
  auto parse = [&](std::vector<std::string> args) -> std::string {
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(parse({"--seed", "-1"}).find("--seed: -1 is out of range") != std::string::npos);
  CHECK(parse({"--seed", "18446744073709551616"}).find("--seed: 18446744073709551616") != std::string::npos);
  CHECK(parse({"--seed", "010"}).empty());
  CHECK(seed == 10);
  CHECK(parse({"--scheduler", ""}).find("--scheduler: an empty value is not allowed") != std::string::npos);
}
