# The psched wire protocol: the one place that defines it. Every frame on a connection is a 4-byte
# little-endian length followed by one flat (unpacked, single-segment or multi-segment standard
# framing) Cap'n Proto message whose root is `Message`. Framing and limits: net/framing.h.
#
# Order on a connection: Hello first (both roles), answered by Welcome or Error-and-close.
# Workers then receive DefineJob/TaskBatch/GiveBack/DropJob and send ResultBatch; clients send Submit/Cancel/
# ClusterInfoRequest/BurnStatus and receive JobAccepted/Progress/JobResult/JobFailed/ClusterInfo.
# Heartbeat flows both ways; Goodbye says a peer is leaving on purpose.
@0xfe7ef69c9a3ed905;

$import "/capnp/c++.capnp".namespace("psched::wire");

# 2: a worker's ChunkPartial covers a run of chunks (ChunkPartial.chunks), and DefineJob says when
# a job needs them one by one. 3: DefineJob.partialBlock says where to cut them (verify compares
# blocks of chunks), and a VerifyMismatch names a range. 4: the normal generator's element
# definition changed (docs/design.md, "The element definition": a table log and fused
# multiply-adds), so a worker of 3 would make other elements for the same job. A peer of another
# version is refused at Hello, naming both. 5: JobSpec.source (stored arrays), which a worker of 4
# would ignore, generating the elements instead. 6: JobSpec.squares (var/std), which a worker of 5
# would ignore, reporting no sum of squares. 7: JobFailed.tag, so a client with several submissions in
# flight knows which one was refused (a client of 6 would guess). 8: the normal generator's element
# definition changed again (a ziggurat in place of Box-Muller), so a worker of 7 would make other
# elements for the same job.
const protocolVersion :UInt32 = 8;

enum Role {
  worker @0;
  client @1;
}

enum Generator {
  normal @0;    # param0 = mean, param1 = std
  uniform @1;   # param0 = low, param1 = high
  arange @2;    # param0 = start, param1 = step
  constant @3;  # param0 = value
}

enum DType {
  float64 @0;
  float32 @1;
  int8 @2;      # the rest: stored arrays only (a generated array is float64 or float32)
  int16 @3;
  int32 @4;
  int64 @5;
  uint8 @6;
  uint16 @7;
  uint32 @8;
  uint64 @9;
  bool @10;
}

# Where a job's elements come from (core/source.h): a generator, or an array in files that every
# worker reads at the same path. The client fills it from the file's header or metadata; the
# scheduler never reads the data.
enum SourceKind {
  generator @0;  # JobSpec.generator and its parameters
  npy @1;
  raw @2;
  npyStack @3;
  zarr @4;
}

enum Compressor {
  none @0;
  zstd @1;
  blosc @2;
}

struct StackFile {
  name @0 :Text;          # a plain name inside StoredArray.path
  rows @1 :UInt64;        # its rows, in order along axis 0
  dataOffset @2 :UInt64;  # bytes of .npy header before element 0
  fortranOrder @3 :Bool;
}

struct StoredArray {
  kind @0 :SourceKind;
  path @1 :Text;               # the file (npy, raw) or the directory (npy stack, zarr)
  bigEndian @2 :Bool;          # the elements' byte order
  fortranOrder @3 :Bool;       # npy, raw: column-major
  dataOffset @4 :UInt64;       # npy, raw: bytes before element 0
  files @5 :List(StackFile);   # npy stack
  storeChunkRows @6 :UInt64;   # zarr: the store's chunk shape (the job's chunks are multiples)
  storeChunkCols @7 :UInt64;
  compressor @8 :Compressor;   # zarr
  fillBits @9 :UInt64;         # zarr: a missing chunk's elements, as the element's bytes (little-endian)
  dimensionSeparator @10 :UInt8;  # zarr: '.' or '/' between a chunk key's indices
  oneDimensional @11 :Bool;    # zarr: keys are "j", not "i.j"
  noFillValue @12 :Bool;       # zarr: fill_value null, so a missing chunk file is an error
}

# A strided selection along one axis, Python's start:stop:step (stop = 2^64-1 means "to the end").
struct Slice {
  start @0 :UInt64;
  stop @1 :UInt64;
  step @2 :UInt64;
}

# One array-sum job (docs/design.md, "The job"); mirrors psched::JobSpec in core/job_spec.h.
struct JobSpec {
  rows @0 :UInt64;
  cols @1 :UInt64;
  chunkRows @2 :UInt64;
  chunkCols @3 :UInt64;
  dtype @4 :DType;
  generator @5 :Generator;
  param0 @6 :Float64;
  param1 @7 :Float64;
  seed @8 :UInt64;
  scale @9 :Float64;      # element expression: scale * x + offset
  offset @10 :Float64;
  rowSel @11 :Slice;
  colSel @12 :Slice;
  fused @13 :Bool;        # generate only the selected elements, store nothing (benchmark variant)
  source @14 :StoredArray; # absent or kind generator: the generator above makes the elements
  squares @15 :Bool;      # also sum the selected elements' squares exactly (var/std: core/variance.h)
}

# What a worker tells the scheduler about itself (also reported to clients in ClusterInfo).
struct WorkerInfo {
  id @0 :UInt32;               # assigned by the scheduler (0 in Hello)
  name @1 :Text;
  host @2 :Text;
  pid @3 :UInt32;
  backend @4 :Text;            # "cpu" or "cuda"
  deviceName @5 :Text;         # GPU name or CPU model
  memoryTotalBytes @6 :UInt64;
  memoryLimitBytes @7 :UInt64; # 0: no limit
  computeMajor @8 :UInt32;     # GPUs only
  computeMinor @9 :UInt32;
  threads @10 :UInt32;
  slots @11 :UInt32;           # chunks the worker wants in flight (its task window)
  chunksDone @12 :UInt64;      # filled by the scheduler in ClusterInfo
  bytesReduced @13 :UInt64;    # array bytes created + reduced, filled by the scheduler
  windowElements @14 :UInt64;  # elements the worker wants in flight when chunks are small: a
                               # job's window is max(slots, windowElements / chunk elements),
                               # at most 65536 chunks (0: slots only)
  busySeconds @15 :Float64;    # backend compute seconds the worker reported so far, filled by
                               # the scheduler in ClusterInfo (GPU: event-timed, overlap removed)
  cpuAffinity @16 :Text;       # CPUs the worker is pinned to, as a list like "0-15,32-47"
                               # ("": not pinned)
  gpu @17 :GpuHealth;          # the latest GPU health (from heartbeats), filled by the scheduler
                               # in ClusterInfo; absent without NVML
  readers @18 :UInt32;         # stored-array chunks the worker reads at once (a CUDA worker's
                               # reading dispatchers); a stored job's window holds slots + readers
                               # (0: slots alone, as a CPU worker's 2 x threads already cover its)
}

struct Hello {
  role @0 :Role;
  protocolVersion @1 :UInt32;
  name @2 :Text;
  token @3 :Text;              # shared secret when the scheduler requires one
  worker @4 :WorkerInfo;       # role = worker only
}

struct Welcome {
  protocolVersion @0 :UInt32;
  peerId @1 :UInt32;           # worker id or client id
  heartbeatMs @2 :UInt32;      # send something at least this often (derived from the scheduler's
                               # timeout for this role, so a short --worker-timeout stays safe)
  schedulerVersion @3 :Text;
  maxFrameBytes @4 :UInt32;    # largest frame the scheduler accepts from this peer (--max-frame):
                               # a worker splits its ResultBatches to fit (0: an older scheduler,
                               # 16 MiB)
}

struct Error {
  message @0 :Text;            # one line, for a person
  jobId @1 :UInt64;            # 0 when not about a job
  refused @2 :Bool;            # one unanswered message refused, nothing more: the connection and
                               # its jobs go on (a BurnStatus psched could not take). A client
                               # before it read such an Error as about the connection.
}

struct Goodbye {
  reason @0 :Text;
}

# A GPU's health as NVML reports it, aggregated over the samples a worker took since its last
# heartbeat (worker/nvml.h samples every kNvmlSampleInterval). core/gpu_health.h is its C++ twin.
struct GpuHealth {
  uuid @0 :Text;                 # NVML's GPU-xxxxxxxx-... identifier
  pciBusId @1 :Text;             # domain:bus:device.function
  samples @2 :UInt32;            # NVML samples behind the figures below (0: none yet)
  smUtilisationPct @3 :Float64;  # mean of NVML's "gpu" utilisation (% of time a kernel ran)
  memUtilisationPct @4 :Float64; # mean of NVML's "memory" utilisation (% of time memory was busy)
  memoryUsedBytes @5 :UInt64;    # device memory in use at the last sample (every process)
  memoryTotalBytes @6 :UInt64;
  smClockMhz @7 :Float64;        # mean SM clock
  smClockMinMhz @8 :UInt32;      # lowest SM clock sampled
  smClockMaxMhz @9 :UInt32;      # the device's maximum SM clock
  temperatureC @10 :UInt32;      # highest GPU temperature sampled
  powerWatts @11 :Float64;       # mean power draw
  powerLimitWatts @12 :Float64;  # enforced power limit
  throttleReasons @13 :UInt64;   # NVML clock throttle reason bits, OR of every sample
  eccCorrected @14 :UInt64;      # volatile ECC error counts (since the driver loaded)
  eccUncorrected @15 :UInt64;
  eccSupported @16 :Bool;        # false: ECC off or not reported, the counts mean nothing
  pcieGeneration @17 :UInt32;    # current link generation and width (0: unknown)
  pcieWidth @18 :UInt32;
  pcieMaxWidth @19 :UInt32;      # the widest the link can train to
  pcieMaxGeneration @20 :UInt32; # the highest generation the link can train to (0: unknown)
  remapSupported @21 :Bool;      # false: NVML gave no row remapping figures (unknown)
  remappedRowsCorrected @22 :UInt32;
  remappedRowsUncorrected @23 :UInt32;
  remapPending @24 :Bool;        # a remap waits for a GPU reset
  remapFailed @25 :Bool;         # a row could not be remapped
  retiredSupported @26 :Bool;    # false: NVML gave no retired pages (unknown; Ampere on remaps rows)
  retiredPagesSbe @27 :UInt32;   # pages retired for repeated single-bit errors
  retiredPagesDbe @28 :UInt32;   # pages retired for a double-bit error
  retiredPending @29 :Bool;      # a retirement waits for the driver to reload
}

struct Heartbeat {
  # Workers report device memory in use; the scheduler sends empty heartbeats.
  memoryUsedBytes @0 :UInt64;
  gpu @1 :GpuHealth;             # GPU workers with NVML only; absent otherwise (hasGpu() false)
}

# Client -> scheduler.
struct Submit {
  tag @0 :UInt64;              # client's own number, echoed in JobAccepted
  spec @1 :JobSpec;
  wantPartials @2 :Bool;       # stream every chunk's partial in Progress
  verifyFraction @3 :Float64;  # share of chunks computed a second time on another worker and
                               # compared bit for bit (docs/design.md, "Verify"): 0 = off,
                               # 1 = every chunk; which ones is a seeded draw (the spec's seed)
  wantTimeline @4 :Bool;       # JobResult carries the job's task stream (for pbench --report)
}

struct Cancel {
  jobId @0 :UInt64;
}

struct ClusterInfoRequest {
  tag @0 :UInt64;
}

# A running burn-in's state (pbench --burn), sent by its watcher about once a second and at the
# end, for the dashboard: psched keeps the latest per client connection, shows it on /,
# /api/status (`burns`) and /metrics, and drops it when the connection closes or `ended` comes.
# No answer; one psched refuses (core/burn_status.h: its limits) gets an Error and is not kept.
enum BurnVerdict {
  pass @0;
  warn @1;
  fail @2;
}

struct BurnGpuStatus {
  worker @0 :Text;             # the worker's name (a burn tells workers apart by name)
  verdict @1 :BurnVerdict;     # so far
  reason @2 :Text;             # the first failure or warning, one line ("" when passing)
  bytesPerSecond @3 :Float64;  # per second of its own compute time
  chunks @4 :UInt64;           # chunks it computed during the burn (every one verified)
  mismatches @5 :UInt64;       # verify votes its copy lost
  gone @6 :Bool;               # left or lost during the burn
}

struct BurnStatus {
  verdict @0 :BurnVerdict;     # the cluster's, so far
  elapsedSeconds @1 :Float64;
  totalSeconds @2 :Float64;    # the burn's asked duration
  ended @3 :Bool;              # the burn is over: psched forgets it
  gpus @4 :List(BurnGpuStatus);
}

# Scheduler -> client.
struct JobAccepted {
  tag @0 :UInt64;
  jobId @1 :UInt64;
  chunks @2 :UInt64;
}

# The exact sum of some elements (psched::ExactSum, core/exact_sum.h), compactly: its finite part
# as non-overlapping doubles, largest first, whose exact (unrounded) sum is the value (ExactSum::
# terms(): empty for zero, typically one to three), and the NaN/infinite elements apart.
struct ExactSum {
  terms @0 :List(Float64);
  nan @1 :UInt32;              # NaN elements
  posInf @2 :UInt32;           # +inf elements
  negInf @3 :UInt32;           # -inf elements
}

# The partial of a range: chunks chunk .. chunk + chunks - 1 of one job. In a ResultBatch a worker
# merges each run of consecutive chunks it finished into one, cut where DefineJob.partialBlock
# says; in Progress every partial is one chunk's.
struct ChunkPartial {
  chunk @0 :UInt64;            # the range's first chunk
  sum @1 :Float64;             # exact, correctly rounded (the receiver rounds `exact` itself)
  count @2 :UInt64;            # selected elements
  min @3 :Float64;
  max @4 :Float64;
  exact @5 :ExactSum;          # the exact sum of the range's selected elements
  chunks @6 :UInt64 = 1;       # chunks in the range
  squares @7 :ExactSum;        # JobSpec.squares only: the exact sum of the elements' squares
}

struct Progress {
  jobId @0 :UInt64;
  chunksDone @1 :UInt64;
  chunksTotal @2 :UInt64;
  runningSum @3 :Float64;      # arrival-order sum of rounded partials, for display only
  partials @4 :List(ChunkPartial);  # only when the job asked for them
  noWorkers @5 :Bool;          # no worker is connected: the job waits for one to join (sent at
                               # once when the last one leaves, then with every heartbeat, and
                               # false again when one joins); the client decides how long to wait
  notices @6 :List(Text);      # what the client should hear about its job, each said once: "worker
                               # 'NAME' stalled: ..." when a worker holding its chunks stopped
                               # making progress and its work went elsewhere
}

struct JobResult {
  jobId @0 :UInt64;
  sum @1 :Float64;
  count @2 :UInt64;
  min @3 :Float64;
  max @4 :Float64;
  chunks @5 :UInt64;
  workers @6 :UInt32;          # workers that computed at least one chunk
  seconds @7 :Float64;         # scheduler time from accept to the last chunk
  retries @8 :UInt64;          # chunks run again after a worker was lost or failed
  exact @9 :ExactSum;          # the exact sum of the selected elements; `sum` is it rounded once
  verifiedChunks @10 :UInt64;  # chunks computed twice (or more) and compared (Submit.verifyFraction)
  sameWorkerChunks @11 :UInt64;  # of those, chunks whose copies all ran on one worker: there was
                                 # no other worker to compare against
  mismatchCount @12 :UInt64;   # verified chunks whose copies differed in any bit
  mismatches @13 :List(VerifyMismatch);  # the first kMaxReportedMismatches of them
  devices @14 :List(DeviceReport);   # how each worker did in this job, stragglers marked
  timeline @15 :List(TaskSegment);   # the job's task stream, when Submit asked for it
  squares @16 :ExactSum;       # JobSpec.squares only: the exact sum of the selected elements'
                               # squares, from which the client computes var and std
}

# One copy of verified chunks: who computed it and what it got (a block's first copy may come from
# several workers: their names joined).
struct VerifyCopy {
  workerId @0 :UInt32;
  workerName @1 :Text;
  deviceName @2 :Text;
  sum @3 :Float64;
  count @4 :UInt64;
  min @5 :Float64;
  max @6 :Float64;
  suspect @7 :Bool;            # this copy is the odd one out (or one of two that disagree)
  exact @8 :ExactSum;          # its exact sum: copies whose rounded sums print alike differ here
  squares @9 :ExactSum;        # a job with JobSpec.squares only: its exact sum of squares, where
                               # copies whose sums agree bit for bit may still differ
}

# Verified chunks whose copies disagree: a block's two copies, or three when a third worker broke
# the tie; once narrowed down to one chunk, the odd copy's worker's and another worker's copies of it.
struct VerifyMismatch {
  chunk @0 :UInt64;            # the first chunk
  copies @1 :List(VerifyCopy); # each copy's partial of the chunks named
  chunks @2 :UInt64 = 1;       # chunks named (1: found down to the chunk)
  note @3 :Text;               # when not found down to the chunk: why the search stopped
}

# One GPU figure over a job: lowest, mean and highest of the heartbeats that came while it ran.
struct MinMeanMax {
  min @0 :Float64;
  mean @1 :Float64;
  max @2 :Float64;
}

# How one worker did in one job (scheduler/job_devices.h).
struct DeviceReport {
  workerId @0 :UInt32;
  name @1 :Text;
  host @2 :Text;
  device @3 :Text;
  chunks @4 :UInt64;
  bytes @5 :UInt64;
  busySeconds @6 :Float64;     # device time the worker reported for its chunks
  bytesPerSecond @7 :Float64;  # bytes / device seconds (busy seconds over its parallelism)
  slow @8 :Bool;               # a straggler: 10% or more below the job's median bytesPerSecond
  cause @9 :Text;              # what NVML shows that explains it ("": nothing seen)
  hasGpu @10 :Bool;            # the figures below are NVML's (false: no NVML on this worker)
  smClockMhz @11 :MinMeanMax;
  smClockMaxMhz @12 :UInt32;
  temperatureC @13 :MinMeanMax;
  powerWatts @14 :MinMeanMax;
  smUtilisationPct @15 :MinMeanMax;
  throttleReasons @16 :UInt64;  # OR over the job
  uuid @17 :Text;
  series @18 :List(GpuPoint);   # the heartbeats' figures over the job, at most 512 (thinned evenly)
  energyJoules @19 :Float64;    # the energy its GPU used on the job's chunks (ResultBatch's)
}

# One heartbeat's GPU figures during a job, for the report's charts.
struct GpuPoint {
  seconds @0 :Float64;          # since the job was accepted
  smClockMhz @1 :Float32;
  temperatureC @2 :Float32;
  powerWatts @3 :Float32;
  smUtilisationPct @4 :Float32;
}

# One ResultBatch in the task stream, on the scheduler's clock (scheduler/task_stream.h).
struct TaskSegment {
  workerId @0 :UInt32;
  firstChunk @1 :UInt64;
  chunks @2 :UInt32;
  startSeconds @3 :Float64;    # since the job was accepted
  endSeconds @4 :Float64;
}

struct JobFailed {
  jobId @0 :UInt64;            # the failed job; 0: the Submit was refused before it had an id
  message @1 :Text;
  tag @2 :UInt64;              # with jobId 0, the refused Submit's tag (0 otherwise)
}

struct ClusterInfo {
  tag @0 :UInt64;
  workers @1 :List(WorkerInfo);
  schedulerVersion @2 :Text;
}

# Scheduler -> worker. The spec travels once per worker per job, then only chunk ranges.
struct DefineJob {
  jobId @0 :UInt64;
  spec @1 :JobSpec;
  partialBlock @2 :UInt64;     # 0: merge runs of consecutive chunks into one partial; B: never
                               # across a multiple of B (verify compares blocks of B chunks; 1: a
                               # partial per chunk, which a client streams)
}

struct TaskRange {
  first @0 :UInt64;
  count @1 :UInt32;
}

struct TaskBatch {
  jobId @0 :UInt64;
  ranges @1 :List(TaskRange);
  reportIntervalUs @2 :UInt32;  # send finished results at least this often, and otherwise only when
                                # half of what is held is done (net/report_pacer.h); the
                                # scheduler lengthens it as its fleet grows (0: 5 ms)
  queueEmpty @3 :Bool;          # nothing else waited at the scheduler once this batch was planned:
                                # a report would bring no top-up, so until the next TaskBatch the
                                # worker reports at the interval or when it holds nothing, not at half
}

struct DropJob {
  jobId @0 :UInt64;            # job finished, failed or cancelled: forget its queued chunks
}

# A job's tail: nothing of it is queued, a worker is idle, and this worker still holds a long run.
# The worker gives back the chunks of first .. first + count - 1 it has not started (never to
# report them), answering at once with a ResultBatch whose `returned` lists them (maybe none);
# the scheduler hands them to the idle worker.
struct GiveBack {
  jobId @0 :UInt64;
  first @1 :UInt64;
  count @2 :UInt64;
}

# Worker -> scheduler.
struct ChunkFailure {
  chunk @0 :UInt64;
  message @1 :Text;
}

struct ResultBatch {
  jobId @0 :UInt64;
  results @1 :List(ChunkPartial);  # one per run of consecutive chunks finished (cut at partialBlock)
  failures @2 :List(ChunkFailure);
  busySeconds @3 :Float64;     # backend compute time for these chunks
  returned @4 :List(TaskRange);  # set only in the answer to a GiveBack: the chunks given back
  energyJoules @5 :Float64;    # busySeconds x the GPU's mean power over the last NVML sample
                               # interval (0: no NVML)
}

struct Message {
  union {
    hello @0 :Hello;
    welcome @1 :Welcome;
    error @2 :Error;
    goodbye @3 :Goodbye;
    heartbeat @4 :Heartbeat;
    submit @5 :Submit;
    cancel @6 :Cancel;
    clusterInfoRequest @7 :ClusterInfoRequest;
    jobAccepted @8 :JobAccepted;
    progress @9 :Progress;
    jobResult @10 :JobResult;
    jobFailed @11 :JobFailed;
    clusterInfo @12 :ClusterInfo;
    defineJob @13 :DefineJob;
    taskBatch @14 :TaskBatch;
    dropJob @15 :DropJob;
    resultBatch @16 :ResultBatch;
    giveBack @17 :GiveBack;
    burnStatus @18 :BurnStatus;  # client -> scheduler; a union member added without a new
                                 # version: a psched without it refuses it as an unexpected kind
  }
}
