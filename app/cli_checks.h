// Checks for command-line values, shared by psched, pcuda-worker and pbench. CLI11 converts
// integers with strtoull (base 0), which wraps "-1" to 2^64-1, saturates values past 2^64-1 and
// reads "010" as octal: each would silently run another job. These transforms see the text first
// and let through only a plain decimal integer inside the option's range, rewritten canonically;
// anything else fails with "--OPTION: VALUE is not ...; expected an integer from LO to HI".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/status.h"
#include "net/tls.h"

namespace psched::cli {

// Parses the command line: --help and --version print and return kExitOk; a bad option or value
// prints CLI11's message and returns kExitUsage (CLI11's own codes are 105-113); nullopt when the
// program should go on. Use: if (auto code = cli::parse(app, argc, argv)) return *code;
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// The integer `text` denotes, if it is a plain decimal integer ([+-]digits) in [lo, hi]; else an
// error naming the value and the range (the option's name is added by CLI11).
StatusOr<int64_t> parse_signed(const std::string& text, int64_t lo, int64_t hi);
StatusOr<uint64_t> parse_unsigned(const std::string& text, uint64_t lo, uint64_t hi);

// For ->transform() on an integer option (unsigned or signed range). CLI11 names the option in
// the message, except a hidden one (group ""): give those their `hidden_name`.
CLI::Validator unsigned_in(uint64_t lo, uint64_t hi, std::string hidden_name = "");
CLI::Validator signed_in(int64_t lo, int64_t hi);

// Python's meaning of a selection start or stop on an axis of `length`: a negative index counts
// from the end (-1: the last element). One that reaches before the start is refused, not clamped
// to 0 as Python would: it is more likely a mistake than a wish for the whole axis. Non-negative
// indices pass unchanged (validate() checks them against the axis).
StatusOr<uint64_t> from_end(int64_t index, uint64_t length);

// For ->check() on a text option where an empty value would otherwise mean "the default"
// (--scheduler "" must not become 127.0.0.1:8786).
CLI::Validator non_empty();

// --tls-ca-file, --tls-cert and --tls-key, the same three options on every binary. `whose` says
// whose certificate it is in the help ("the scheduler's", "this worker's").
void add_tls_flags(CLI::App& app, TlsFiles& files, const std::string& whose);

// For app.failure_message(): a refused command line is one line on stderr, "PROGRAM: --OPTION:
// what is wrong (see --help)", as every other error of our binaries is.
std::function<std::string(const CLI::App*, const CLI::Error&)> one_line_failure(std::string program);

}  // namespace psched::cli
