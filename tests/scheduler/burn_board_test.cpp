#include <catch2/catch.hpp>

#include "scheduler/burn_board.h"

using namespace psched;

namespace {

BurnStatus burn_of(const std::string& worker, BurnVerdict verdict) {
  BurnStatus b;
  b.verdict = verdict;
  b.total_seconds = 60;
  b.gpus.push_back({worker, verdict, "", 1e9, 10, 0, false});
  return b;
}

}  // namespace

TEST_CASE("a client's newer burn status replaces its older one", "[burn_board]") {
  BurnBoard board;
  REQUIRE(board.update(1, "pbench", burn_of("gpu-0", BurnVerdict::kPass)));

  REQUIRE(board.update(1, "pbench", burn_of("gpu-0", BurnVerdict::kFail)));

  REQUIRE(board.burns().size() == 1);
  CHECK(board.burns().at(1).client == "pbench");
  CHECK(board.burns().at(1).status.gpus.at(0).verdict == BurnVerdict::kFail);
}

TEST_CASE("a burn that says it ended is forgotten, as is one whose client left", "[burn_board]") {
  BurnBoard board;
  REQUIRE(board.update(1, "a", burn_of("gpu-0", BurnVerdict::kPass)));
  REQUIRE(board.update(2, "b", burn_of("gpu-1", BurnVerdict::kPass)));
  BurnStatus ended = burn_of("gpu-0", BurnVerdict::kPass);
  ended.ended = true;

  REQUIRE(board.update(1, "a", ended));
  board.drop(2);

  CHECK(board.burns().empty());
}

TEST_CASE("a burn past kMaxBurnsHeld others is refused and changes nothing", "[burn_board]") {
  BurnBoard board;
  for (ClientId c = 1; c <= kMaxBurnsHeld; ++c) REQUIRE(board.update(c, "pbench", burn_of("gpu", BurnVerdict::kPass)));

  const Status refused = board.update(100, "pbench", burn_of("gpu", BurnVerdict::kPass));

  CHECK(refused.message() == "burn status refused: 8 burns are shown already, at most 8");
  CHECK(board.burns().size() == kMaxBurnsHeld);
  CHECK(board.update(3, "pbench", burn_of("gpu", BurnVerdict::kWarn)));  // one already held may update
}
