#include "app/cli_checks.h"

#include <fmt/format.h>

#include "app/exit_codes.h"

namespace psched::cli {

std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int printed = app.exit(e);  // prints help, the version or the error
    return printed == int(CLI::ExitCodes::Success) ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

namespace {

// Decimal text to a 128-bit value; nullopt-like false when it is not [+-]digits or has more
// digits than any 64-bit value needs (the range check then says "out of range").
bool parse_decimal(const std::string& text, __int128& value, bool& too_long) {
  too_long = false;
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  if (i == text.size()) return false;
  __int128 v = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') return false;
    if (v > (__int128(1) << 80)) {
      too_long = true;  // keep scanning: a letter later still makes it "not an integer"
      continue;
    }
    v = v * 10 + (c - '0');
  }
  value = negative ? -v : v;
  return true;
}

std::string range_text(__int128 lo, __int128 hi) {
  auto text = [](__int128 v) {
    return v < 0 ? fmt::format("-{}", uint64_t(-v)) : fmt::format("{}", uint64_t(v));
  };
  return fmt::format("an integer from {} to {}", text(lo), text(hi));
}

StatusOr<__int128> parse_in(const std::string& text, __int128 lo, __int128 hi) {
  __int128 v = 0;
  bool too_long = false;
  if (!parse_decimal(text, v, too_long))
    return Status::invalid(fmt::format("'{}' is not a decimal integer; expected {}", text,
                                       range_text(lo, hi)));
  if (too_long || v < lo || v > hi)
    return Status::invalid(fmt::format("{} is out of range; expected {}", text, range_text(lo, hi)));
  return v;
}

}  // namespace

StatusOr<int64_t> parse_signed(const std::string& text, int64_t lo, int64_t hi) {
  auto v = parse_in(text, lo, hi);
  if (!v) return v.status();
  return int64_t(*v);
}

StatusOr<uint64_t> parse_unsigned(const std::string& text, uint64_t lo, uint64_t hi) {
  auto v = parse_in(text, lo, hi);
  if (!v) return v.status();
  return uint64_t(*v);
}

StatusOr<uint64_t> from_end(int64_t index, uint64_t length) {
  if (index >= 0) return uint64_t(index);
  const uint64_t back = uint64_t(0) - uint64_t(index);  // |index|, also for INT64_MIN
  if (back > length)
    return Status::invalid(fmt::format("{} counts back from the end of an axis of {}, past its start "
                                       "(expected -{} or more)",
                                       index, length, length));
  return length - back;
}

CLI::Validator unsigned_in(uint64_t lo, uint64_t hi, std::string hidden_name) {
  return CLI::Validator(
      [lo, hi, hidden_name](std::string& text) -> std::string {
        auto v = parse_unsigned(text, lo, hi);
        if (!v) return hidden_name.empty() ? v.message() : hidden_name + ": " + v.message();
        text = std::to_string(*v);  // canonical: no sign, no leading zeros (CLI11 reads 010 as 8)
        return "";
      },
      fmt::format("[{}..{}]", lo, hi), "unsigned_in");
}

CLI::Validator signed_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        auto v = parse_signed(text, lo, hi);
        if (!v) return v.message();
        text = std::to_string(*v);
        return "";
      },
      fmt::format("[{}..{}]", lo, hi), "signed_in");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? std::string("an empty value is not allowed") : std::string();
      },
      "", "non_empty");
}

std::function<std::string(const CLI::App*, const CLI::Error&)> one_line_failure(std::string program) {
  return [program = std::move(program)](const CLI::App*, const CLI::Error& e) {
    std::string what = e.what();
    if (what.rfind(": ", 0) == 0) what.erase(0, 2);  // a hidden option's empty name
    return fmt::format("{}: {} (see --help)\n", program, what);
  };
}

void add_tls_flags(CLI::App& app, TlsFiles& files, const std::string& whose) {
  app.add_option("--tls-ca-file", files.ca_file,
                 "TLS: the cluster CA (PEM) that signs every peer's certificate; turns TLS on")
      ->check(non_empty())->group("TLS");
  app.add_option("--tls-cert", files.cert_file, "TLS: " + whose + " certificate (PEM), signed by the CA")
      ->check(non_empty())->group("TLS");
  app.add_option("--tls-key", files.key_file, "TLS: " + whose + " private key (PEM), mode 600")
      ->check(non_empty())->group("TLS");
}

}  // namespace psched::cli
