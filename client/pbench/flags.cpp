#include "flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <tuple>

#include "burn.h"
#include "core/job_spec.h"
#include "net/event_loop.h"

namespace pbench {
namespace {

// --stats' choices: every figure of client/figures.h, in its order.
std::vector<std::string> figure_names() {
  std::vector<std::string> names;
  for (const pclient::FigureDef& figure : pclient::kFigures) names.emplace_back(figure.name);
  return names;
}

void add_mode_flags(CLI::App& app, Flags& f) {
  auto* g_opt = app.add_option("-g,--gpus", f.gpus, "Local mode: start a cluster with N GPU workers (GPUs 0..N-1)")
                    ->transform(psched::cli::unsigned_in(1, 1024));
  auto* c_opt = app.add_option("-c,--cpus", f.cpus, "Local mode: start a cluster with N CPU workers")
                    ->transform(psched::cli::unsigned_in(1, 1024));
  auto* d_opt = app.add_flag("-d,--distributed", f.distributed,
                             "Use a running cluster (--scheduler or --scheduler-file; default localhost:8786)");
  g_opt->excludes(c_opt);
  d_opt->excludes(g_opt)->excludes(c_opt);
}

void add_cluster_flags(CLI::App& app, Flags& f) {
  app.add_option("--scheduler", f.scheduler, "Scheduler address: tcp://HOST:PORT, tls://HOST:PORT, HOST:PORT or HOST")
      ->check(psched::cli::non_empty());
  app.add_option("--scheduler-file", f.scheduler_file, "Read the scheduler address from this file")
      ->check(psched::cli::non_empty());
  app.add_option("--token-file", f.token_file, "File holding the cluster token (or set PSCHED_TOKEN)")
      ->check(psched::cli::non_empty());
  psched::cli::add_tls_flags(app, f.tls, "this client's");
  app.add_option("--nthreads", f.nthreads, "Local CPU mode: threads per worker (default: cores / N)")
      ->transform(psched::cli::unsigned_in(1, 4096));
  app.add_option("--memory-limit", f.memory_limit, "Local mode: --memory-limit for each worker");
  app.add_option("--connect-timeout", f.connect_timeout_ms, "Milliseconds to wait for the scheduler")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 3600000));
  app.add_option("--reconnect", f.reconnect_s,
                 "Seconds to wait for the scheduler to come back when the connection to it is lost "
                 "mid-job (psched killed or restarted), then submit the job again: the same bits "
                 "(default 0: fail at once)")
      ->capture_default_str()->transform(psched::cli::unsigned_in(0, 86400));
  app.add_option_function<std::string>(
         "--no-workers-timeout",
         [&f](const std::string& v) {
           f.no_workers_timeout_ms = v == "never" ? 0 : std::stoi(v) * 1000;
         },
         "Seconds a job may wait with no worker connected (none registered yet, or the last one "
         "left or died) before pbench gives it up, or 'never' (default: " +
             std::to_string(pclient::RunOptions::kDefaultNoWorkersTimeoutMs / 1000) + ")")
      ->check(CLI::IsMember({"never"}) | psched::cli::unsigned_in(1, 86400));
  app.add_option("--spin-us", f.spin_us,
                 "Microseconds the client (and, in local mode, the daemons) keep polling after each "
                 "message before sleeping; 0 = sleep at once (default: " +
                     std::to_string(psched::kDefaultSpin.count()) + ")")
      ->transform(psched::cli::unsigned_in(0, 1000000));
}

void add_job_flags(CLI::App& app, Flags& f) {
  pclient::Job& job = f.job;
  // Sizes, chunks and steps: at least 1. Starts and stops: any 64-bit integer (negative: from the end).
  const CLI::Validator count = psched::cli::unsigned_in(1, UINT64_MAX);
  const CLI::Validator index = psched::cli::signed_in(INT64_MIN, INT64_MAX);
  app.add_option("-x,--rows", job.rows, "Rows of the array")->capture_default_str()->transform(count);
  app.add_option("-y,--cols", job.cols, "Columns of the array")->capture_default_str()->transform(count);
  app.add_option("--chunk-x", job.chunk_rows, "Rows per chunk")->capture_default_str()->transform(count);
  app.add_option("--chunk-y", job.chunk_cols, "Columns per chunk")->capture_default_str()->transform(count);
  app.add_option("--dtype", job.dtype,
                 "Element type: float64 or float32 for a generated array; for --input raw also int8, int16, "
                 "int32, int64, uint8, uint16, uint32, uint64 or bool")
      ->capture_default_str();
  app.add_option("--generator", job.generator, "normal, uniform, arange or constant")->capture_default_str();
  app.add_option("--mean", f.mean, "normal: mean")->capture_default_str();
  app.add_option("--std", f.std_dev, "normal: standard deviation")->capture_default_str();
  app.add_option("--low", f.low, "uniform: low")->capture_default_str();
  app.add_option("--high", f.high, "uniform: high")->capture_default_str();
  app.add_option("--start", f.start, "arange: first value")->capture_default_str();
  app.add_option("--step", f.step, "arange: step")->capture_default_str();
  app.add_option("--value", f.value, "constant: the value")->capture_default_str();
  app.add_option("--seed", job.seed, "Generator seed (normal, uniform)")->capture_default_str()
      ->transform(psched::cli::unsigned_in(0, UINT64_MAX));
  app.add_option("--scale", job.scale, "Expression: scale * x + offset")->capture_default_str();
  app.add_option("--offset", job.offset,
                 "Expression: scale * x + offset (DeepOps' x + 1; with --input the default is 0, the "
                 "stored elements themselves)")
      ->capture_default_str();
  app.add_option("--row-start", f.row_start, "Selection: first row (negative: counted from the end)")
      ->transform(index);
  app.add_option("--row-stop", f.row_stop, "Selection: row stop (default: end; negative: from the end)")
      ->transform(index);
  app.add_option("--row-step", job.row_step, "Selection: row step")->capture_default_str()->transform(count);
  app.add_option("--col-start", f.col_start, "Selection: first column (negative: counted from the end)")
      ->transform(index);
  app.add_option("--col-stop", f.col_stop, "Selection: column stop (default: end; negative: from the end)")
      ->transform(index);
  app.add_option("--col-step", job.col_step, "Selection: column step")->capture_default_str()->transform(count);
  app.add_option("--input", f.input.path,
                 "Sum an array in files instead of generating one: a .npy file, a directory of .npy files "
                 "stacked along axis 0, a Zarr v2 store, or a raw file (--dtype, --shape); every worker reads "
                 "it at this path")
      ->check(psched::cli::non_empty());
  app.add_option("--format", f.input.format, "--input's format: npy, npy-stack, raw or zarr (default: from the path)")
      ->check(CLI::IsMember({"npy", "npy-stack", "raw", "zarr"}));
  app.add_option("--shape", f.shape, "--input raw: the array's shape, ROWS,COLS (or N or N-D, leading axes flattened)");
  app.add_option("--data-offset", f.input.offset, "--input raw: bytes before the first element")
      ->transform(psched::cli::unsigned_in(0, UINT64_MAX));
  app.add_option("--byte-order", f.input.byte_order, "--input raw: little (default) or big")
      ->check(CLI::IsMember({"little", "big"}));
  app.add_option("--write-npy", f.write_npy,
                 "Write the generated array (the generator's own elements, as --dtype stores them) to this "
                 ".npy file, then exit: a file job and a generator job can be compared bit for bit (written beside it "
                 "as PATH.partial-PID and renamed once whole; removed if writing fails)");
  app.add_option("--write-zarr", f.write_zarr,
                 "Write the generated array to this Zarr v2 store, one store chunk per job chunk, then exit (written "
                 "beside it as PATH.partial-PID/ and renamed once whole; removed if writing fails; a store already "
                 "at PATH is replaced, anything else there but an empty directory refused)");
  app.add_option("--compressor", f.compressor,
                 "--write-zarr's compressor: none, zstd, blosc-lz4, blosc-zstd or blosc-zlib")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "zstd", "blosc-lz4", "blosc-zstd", "blosc-zlib"}));
  app.add_flag("--fused", job.fused,
               "Generate only the selected elements, storing nothing (reported separately; not the "
               "DeepOps benchmark's create-then-reduce)");
}

void add_output_flags(CLI::App& app, Flags& f) {
  app.add_option("--repeat", f.repeat, "Run the job N times in one session")->capture_default_str()
      ->transform(psched::cli::unsigned_in(1, 1000000));
  app.add_flag("--json", f.json, "Print one JSON object instead of text");
  app.add_option("--report", f.report_html,
                 "Write a self-contained HTML performance report of the (last) run to this file");
  app.add_option("--report-json", f.report_json, "Write the performance report's data as JSON to this file");
  app.add_flag("--check", f.check, "Verify the result: exact closed form for arange/constant, mean bound for "
                                   "normal/uniform; exit 1 on any difference");
  app.add_option("--verify", f.verify,
                 "Compute every chunk (or this fraction of them, a seeded draw) a second time on "
                 "another worker and compare the partials bit for bit; exit 1 on any mismatch")
      ->expected(0, 1)
      ->default_str("1.0")
      ->type_name("[FRACTION]");
  app.add_option("--stats", f.stats,
                 "Figures to compute, comma-separated: sum, count, mean, min, max (always computed, as before) "
                 "and var, std (exact: correctly rounded, the same bits on any chunking or worker count; the "
                 "workers then also sum each element's square)")
      ->delimiter(',')
      ->check(CLI::IsMember(figure_names()))
      ->default_str("sum,count,mean,min,max");
  app.add_option("--ddof", f.ddof, "var and std divide by count - ddof (numpy's ddof: 0, or 1 for the sample)")
      ->capture_default_str();
  app.add_flag("-q,--quiet", f.quiet, "No progress bar");
  app.add_flag("--cluster-info", f.cluster_info, "Print the cluster's workers (backend, device, memory) and exit");
  app.add_option("--log-level", f.log_level, "Local mode: log level of the daemons")->capture_default_str();
}

// A share in (0, 1] or a temperature: a plain decimal number in its range, else one line naming it.
CLI::Validator number_in(double lo, double hi, bool lo_open) {
  return CLI::Validator(
      [lo, hi, lo_open](std::string& v) -> std::string {
        size_t used = 0;
        double x = 0;
        try {
          x = std::stod(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == v.size() && used > 0 && (lo_open ? x > lo : x >= lo) && x <= hi) return {};
        return fmt::format("expected a number {} {} and <= {} (got '{}')", lo_open ? ">" : ">=", lo, hi, v);
      },
      "NUMBER");
}

void add_burn_flags(CLI::App& app, Flags& f) {
  auto* burn = app.add_option_function<std::string>(
                      "--burn", [&f](const std::string& v) { f.burn_seconds = *parse_burn_duration(v); },
                      "Cluster acceptance run: keep every worker busy with verified jobs (each block computed on "
                      "two GPUs and compared) for DURATION (90s, 10m, 2h), then a verdict per GPU; exit 0 all "
                      "pass, 1 any failure, 5 warnings only")
                   ->type_name("DURATION")
                   ->check(CLI::Validator(
                       [](std::string& v) {
                         auto d = parse_burn_duration(v);
                         return d ? std::string() : d.message();
                       },
                       "DURATION"));
  app.add_option("--burn-report", f.burn_report,
                 "--burn: write its report here (PATH.json: the JSON document; else a self-contained HTML page)")
      ->check(psched::cli::non_empty())
      ->needs(burn);
  app.add_option("--burn-slow", f.burn_slow_fraction,
                 "--burn: warn for a GPU below this share of the median throughput of its model")
      ->capture_default_str()
      ->check(number_in(0, 1, true))
      ->needs(burn);
  app.add_option("--burn-max-temp", f.burn_max_temperature_c, "--burn: warn for a GPU hotter than this (C)")
      ->capture_default_str()
      ->check(number_in(0, 200, false))
      ->needs(burn);
  for (const char* other : {"--repeat", "--check", "--verify", "--report", "--report-json", "--cluster-info",
                            "--write-npy", "--write-zarr"})
    burn->excludes(app.get_option(other));
}

}  // namespace

bool Flags::wants(const pclient::FigureDef& figure) const {
  return std::find(stats.begin(), stats.end(), figure.name) != stats.end();
}

void add_flags(CLI::App& app, Flags& f) {
  add_mode_flags(app, f);
  add_job_flags(app, f);
  add_cluster_flags(app, f);
  add_output_flags(app, f);
  add_burn_flags(app, f);
}

namespace {

// --input: the file's job, with the flags the user gave laid over it.
void open_input(Flags& f, const CLI::App& app) {
  pclient::Input& in = f.input;
  for (size_t at = 0; !f.shape.empty() && at <= f.shape.size();) {
    const size_t comma = std::min(f.shape.find(',', at), f.shape.size());
    const std::string dim = f.shape.substr(at, comma - at);
    if (dim.empty() || dim.size() > 19 || dim.find_first_not_of("0123456789") != std::string::npos)
      throw pclient::Error("--shape: expected sizes like 1000,2000 (got '" + f.shape + "')");
    in.shape.push_back(std::stoull(dim));
    at = comma + 1;
  }
  if (app.count("--dtype") > 0) in.dtype = f.job.dtype;
  pclient::Job opened = pclient::open_array(in);
  const pclient::Job& given = f.job;
  auto keep = [&](const char* flag, auto& field, const auto& value) {
    if (app.count(flag) > 0) field = value;
  };
  for (const char* flag : {"--rows", "--cols"})
    if (app.count(flag) > 0)
      throw pclient::Error(std::string(flag) + ": --input's array has the shape its file says (" +
                           std::to_string(opened.rows) + " x " + std::to_string(opened.cols) + ")");
  for (const char* flag : {"--generator", "--mean", "--std", "--low", "--high", "--start", "--step", "--value",
                           "--seed", "--fused"})
    if (app.count(flag) > 0) throw pclient::Error(std::string(flag) + " is for generated arrays, not --input");
  keep("--chunk-x", opened.chunk_rows, given.chunk_rows);
  keep("--chunk-y", opened.chunk_cols, given.chunk_cols);
  keep("--scale", opened.scale, given.scale);
  keep("--offset", opened.offset, given.offset);
  keep("--row-step", opened.row_step, given.row_step);
  keep("--col-step", opened.col_step, given.col_step);
  f.job = opened;
}

}  // namespace

void complete_job(Flags& f, const CLI::App& app) {
  if (!f.input.path.empty()) {
    if (f.check)
      throw pclient::Error("--check compares with a generator's known sum; a stored array has none (--verify "
                           "computes every chunk twice and compares)");
    if (!f.write_npy.empty() || !f.write_zarr.empty())
      throw pclient::Error("--write-npy and --write-zarr write a generated array; --input reads one");
    open_input(f, app);
  } else {
    for (const char* flag : {"--format", "--shape", "--data-offset", "--byte-order"})
      if (app.count(flag) > 0) throw pclient::Error(std::string(flag) + " describes --input, which is not given");
  }
  pclient::Job& job = f.job;
  if (f.input.path.empty()) {
    if (job.generator == "normal") { job.param0 = f.mean; job.param1 = f.std_dev; }
    else if (job.generator == "uniform") { job.param0 = f.low; job.param1 = f.high; }
    else if (job.generator == "arange") { job.param0 = f.start; job.param1 = f.step; }
    else if (job.generator == "constant") { job.param0 = f.value; job.param1 = 0; }
  }
  for (auto [given, length, field, name] :
       {std::tuple{&f.row_start, job.rows, &job.row_start, "--row-start"},
        std::tuple{&f.row_stop, job.rows, &job.row_stop, "--row-stop"},
        std::tuple{&f.col_start, job.cols, &job.col_start, "--col-start"},
        std::tuple{&f.col_stop, job.cols, &job.col_stop, "--col-stop"}}) {
    if (!*given) continue;
    auto index = psched::cli::from_end(**given, length);
    if (!index) throw pclient::Error(std::string(name) + ": " + index.message());
    *field = *index;
  }
  job.squares = false;
  for (const pclient::FigureDef& figure : pclient::kFigures) job.squares = job.squares || (figure.squares && f.wants(figure));
  pclient::validate(job);
  if (psched::Status st = psched::validate_verify_fraction(f.verify); !st)
    throw pclient::Error("--verify: " + st.message());
}

}  // namespace pbench
