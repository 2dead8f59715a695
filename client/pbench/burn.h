// pbench --burn DURATION: a cluster acceptance run. For the whole duration every worker is kept
// busy with verified jobs (each block computed on two different GPUs and compared bit for bit, a
// third breaking a tie): the job pbench's flags describe (the DeepOps benchmark by default; with
// --input a generated array of the file's shape), the same array in chunks ten times smaller per
// side, and --input's files when given, in turn, generated ones with a fresh seed each turn. A second connection watches the workers once a second (their NVML health and
// bytes reduced), prints a live line per GPU and feeds the ledger (burn_ledger.h), which gives
// the verdicts; burn_report.h prints and writes them. Ctrl-C or SIGTERM ends the burn early,
// cancelling the job in flight, and the report of what ran is still written.
#pragma once

#include <string>

#include "core/status.h"
#include "flags.h"
#include "pclient/client.h"

namespace pbench {

// "90", "90s", "10m", "2h" (whole numbers) in seconds; an error naming the value otherwise.
psched::StatusOr<double> parse_burn_duration(const std::string& text);

// The jobs a burn turns through (see above), from pbench's completed flags.
std::vector<pclient::Job> burn_jobs(const Flags& f);

class LocalCluster;

// Runs the burn on a connected client (`connect` opens the watching connection) and reports it.
// In local mode `local` is pbench's cluster: a worker process that ends is reaped and how it ended
// (a signal, an exit status) is its cause in the ledger; nullptr with -d.
// Returns pbench's exit code: 0 every GPU passed, 1 any failure, kExitBurnWarnings warnings only,
// 130/143 when interrupted with nothing failed.
int run_burn(pclient::Client& client, const pclient::ConnectOptions& connect, const Flags& f,
             LocalCluster* local = nullptr);

}  // namespace pbench
