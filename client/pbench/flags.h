// pbench's command line: every flag into one Flags, and the job completed from them (the
// generator's parameters, the selection counted from the ends) and checked as the scheduler would.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/cli_checks.h"
#include "client/figures.h"
#include "pclient/client.h"

namespace pbench {

struct Flags {
  pclient::Job job;
  int gpus = 0, cpus = 0, repeat = 1, nthreads = 0;
  bool distributed = false, json = false, check = false, quiet = false, cluster_info = false;
  std::string scheduler, scheduler_file, token_file, memory_limit, log_level = "warning";
  psched::TlsFiles tls;
  std::string report_html, report_json;  // --report, --report-json: files to write after the run
  double mean = 10.0, std_dev = 1.0, low = 0.0, high = 1.0, start = 0.0, step = 1.0, value = 1.0;
  std::optional<int64_t> row_start, row_stop, col_start, col_stop;  // negative: from the end
  int connect_timeout_ms = 5000;
  int reconnect_s = 0;
  int no_workers_timeout_ms = pclient::RunOptions::kDefaultNoWorkersTimeoutMs;  // 0: never
  int spin_us = -1;
  // --stats: the figures to print. sum, count, mean, min and max come with every job; var and std
  // make the workers sum squares too (Job::squares). --ddof: var's and std's divisor is count - ddof.
  std::vector<std::string> stats;
  bool wants(const pclient::FigureDef& figure) const;  // asked for with --stats (client/figures.h)
  uint32_t ddof = 0;
  double verify = 0;  // --verify: share of chunks computed twice (0: off)
  // Test only (PSCHED_TEST_WANT_PARTIALS=1, environment only): every chunk's partial streamed as it
  // lands, as a client that wants them asks; bench/chaos.sh stops such a pbench to make a slow reader.
  bool want_partials = false;
  // --input: an array in files (its raw description: --format, --shape, --data-offset, --byte-order,
  // and --dtype, which for a generated array is the array's own type).
  pclient::Input input;
  std::string shape;
  // --write-npy / --write-zarr: write the generated array to files instead of summing it.
  std::string write_npy, write_zarr, compressor = "none";

  // --burn DURATION (burn.h): verified jobs on every worker for this many seconds (0: no burn),
  // --burn-report PATH, and what makes a GPU warn: --burn-slow (share of its model's median
  // throughput) and --burn-max-temp (C).
  double burn_seconds = 0;
  std::string burn_report;
  double burn_slow_fraction = 0.9, burn_max_temperature_c = 85;

  bool local_mode() const { return gpus > 0 || cpus > 0; }
};

// Every flag of pbench, in its groups: mode (-g, -c, -d), job, cluster and output.
void add_flags(CLI::App& app, Flags& f);

// The generator's parameters and the selection from their flags (Python's meaning: a negative
// start or stop counts from the end of its axis); throws pclient::Error for a job the scheduler
// would refuse.
// With --input, the array's own shape, type and chunks come from its header, and the expression
// and selection are x itself and every element unless their flags say otherwise.
void complete_job(Flags& f, const CLI::App& app);

}  // namespace pbench
