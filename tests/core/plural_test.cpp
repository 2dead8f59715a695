// Counts and chunk ranges in messages (core/plural.h).
#include <catch2/catch.hpp>

#include "core/plural.h"

using namespace psched;

TEST_CASE("a range of chunks reads forwards, even one a peer made run past 2^64", "[plural]") {
  CHECK(chunks_text(7, 1) == "chunk 7");
  CHECK(chunks_text(5, 5) == "chunks 5 to 9");
  CHECK(chunks_text(5, UINT64_MAX - 3) == "18446744073709551612 chunks from chunk 5");
  CHECK(chunks_text(UINT64_MAX, UINT64_MAX - 1) == "18446744073709551614 chunks from chunk 18446744073709551615");
  CHECK(chunks_text(UINT64_MAX - 1, 2) == "chunks 18446744073709551614 to 18446744073709551615");
  CHECK(chunks_text(3, 0) == "no chunks (at chunk 3)");
  CHECK(counted(1, "worker") == "1 worker");
  CHECK(counted(2, "match", "matches") == "2 matches");
}
