// A failure's code is set where it is found and decides the exit code (app/exit_codes.h).
#include <catch2/catch.hpp>

#include "app/exit_codes.h"
#include "core/job_spec.h"
#include "net/address.h"
#include "net/token.h"

using namespace psched;

TEST_CASE("a failure's kind decides a binary's exit code", "[status]") {
  CHECK(Status::ok().code() == StatusCode::kOk);
  CHECK(exit_code(Status::ok().code()) == kExitOk);
  CHECK(exit_code(Status::error("port taken").code()) == kExitFailure);
  CHECK(exit_code(Status::invalid("bad value").code()) == kExitUsage);
  const Status empty_message = Status::error("");
  CHECK(!empty_message.is_ok());  // the code, not the message, says it failed
}

TEST_CASE("a StatusOr carries its failure's code", "[status]") {
  const StatusOr<int> r = Status::invalid("--x: 'y' is not a number");
  REQUIRE(!r);
  CHECK(r.status().code() == StatusCode::kInvalid);
  CHECK(r.message() == "--x: 'y' is not a number");
}

TEST_CASE("what the user gives wrong is kInvalid where it is found", "[status]") {
  CHECK(parse_address("tcp://", 8786).status().code() == StatusCode::kInvalid);
  CHECK(load_token("/nonexistent-psched-dir/token").status().code() == StatusCode::kInvalid);
  JobSpec spec;
  spec.rows = 0;
  CHECK(validate(spec).code() == StatusCode::kInvalid);
}
