// What pbench --burn reports: one JSON document (the verdict per GPU and for the cluster, each GPU's
// figures over time, the mismatches, the events and the totals), printed with --json, written by
// --burn-report PATH (a .json path gets the document, any other the HTML page around it: the
// --report page's look, self-contained, drawn by inline script), and a text summary on stdout.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "burn_ledger.h"
#include "core/status.h"

namespace pbench {

// The cluster's totals of a burn.
struct BurnTotals {
  double asked_seconds = 0, seconds = 0;
  uint64_t jobs = 0;         // finished, every chunk verified
  uint64_t jobs_cut = 0;     // cancelled at the deadline or on Ctrl-C
  uint64_t chunks = 0, verified_chunks = 0, bytes = 0;
  int interrupted_by = 0;    // the signal that stopped it early (0: ran its time)
};

nlohmann::json burn_report_json(const BurnLedger& ledger, const BurnTotals& totals);
std::string burn_report_html(const nlohmann::json& report);
// PATH ending in .json: the document; else the HTML page.
psched::Status write_burn_report(const std::string& path, const nlohmann::json& report);
// The verdict per GPU and the cluster's, for a person (stdout).
void print_burn_text(const nlohmann::json& report);

}  // namespace pbench
