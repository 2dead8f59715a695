# The psched wire protocol: the one place that defines it. Every frame on a connection is a 4-byte
# little-endian length followed by one flat (unpacked, single-segment or multi-segment standard
# framing) Cap'n Proto message whose root is `Message`. Framing and limits: common/framing.h.
#
# Order on a connection: Hello first (both roles), answered by Welcome or Error-and-close.
# Workers then receive DefineJob/TaskBatch/DropJob and send ResultBatch; clients send Submit/Cancel/
# ClusterInfoRequest and receive JobAccepted/Progress/JobResult/JobFailed/ClusterInfo.
# Heartbeat flows both ways; Goodbye says a peer is leaving on purpose.
@0xfe7ef69c9a3ed905;

$import "/capnp/c++.capnp".namespace("psched::wire");

const protocolVersion :UInt32 = 1;

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
}

# A strided selection along one axis, Python's start:stop:step (stop = 2^64-1 means "to the end").
struct Slice {
  start @0 :UInt64;
  stop @1 :UInt64;
  step @2 :UInt64;
}

# One array-sum job (docs/design.md, "The job"); mirrors psched::JobSpec in common/job_spec.h.
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
}

struct Goodbye {
  reason @0 :Text;
}

struct Heartbeat {
  # Workers report device memory in use; the scheduler sends empty heartbeats.
  memoryUsedBytes @0 :UInt64;
}

# Client -> scheduler.
struct Submit {
  tag @0 :UInt64;              # client's own number, echoed in JobAccepted
  spec @1 :JobSpec;
  wantPartials @2 :Bool;       # stream every chunk's partial in Progress
  verifyFraction @3 :Float64;  # share of chunks computed a second time on another worker and
                               # compared bit for bit (docs/design.md, "Verify"): 0 = off,
                               # 1 = every chunk; which ones is a seeded draw (the spec's seed)
}

struct Cancel {
  jobId @0 :UInt64;
}

struct ClusterInfoRequest {
  tag @0 :UInt64;
}

# Scheduler -> client.
struct JobAccepted {
  tag @0 :UInt64;
  jobId @1 :UInt64;
  chunks @2 :UInt64;
}

# The exact sum of some elements (psched::ExactSum, common/exact_sum.h), compactly: its finite part
# as non-overlapping doubles, largest first, whose exact (unrounded) sum is the value (ExactSum::
# terms(): empty for zero, typically one to three), and the NaN/infinite elements apart.
struct ExactSum {
  terms @0 :List(Float64);
  nan @1 :UInt32;              # NaN elements
  posInf @2 :UInt32;           # +inf elements
  negInf @3 :UInt32;           # -inf elements
}

struct ChunkPartial {
  chunk @0 :UInt64;
  sum @1 :Float64;             # exact, correctly rounded (the receiver rounds `exact` itself)
  count @2 :UInt64;
  min @3 :Float64;
  max @4 :Float64;
  exact @5 :ExactSum;          # the exact sum of the chunk's selected elements
}

struct Progress {
  jobId @0 :UInt64;
  chunksDone @1 :UInt64;
  chunksTotal @2 :UInt64;
  runningSum @3 :Float64;      # arrival-order sum of rounded partials, for display only
  partials @4 :List(ChunkPartial);  # only when the job asked for them
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
}

# One copy of a verified chunk: who computed it and what it got.
struct VerifyCopy {
  workerId @0 :UInt32;
  workerName @1 :Text;
  deviceName @2 :Text;
  sum @3 :Float64;
  count @4 :UInt64;
  min @5 :Float64;
  max @6 :Float64;
  suspect @7 :Bool;            # this copy is the odd one out (or one of two that disagree)
}

# A verified chunk whose copies disagree: two copies, or three when a third worker broke the tie.
struct VerifyMismatch {
  chunk @0 :UInt64;
  copies @1 :List(VerifyCopy);
}

struct JobFailed {
  jobId @0 :UInt64;
  message @1 :Text;
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
}

struct TaskRange {
  first @0 :UInt64;
  count @1 :UInt32;
}

struct TaskBatch {
  jobId @0 :UInt64;
  ranges @1 :List(TaskRange);
}

struct DropJob {
  jobId @0 :UInt64;            # job finished, failed or cancelled: forget its queued chunks
}

# Worker -> scheduler.
struct ChunkFailure {
  chunk @0 :UInt64;
  message @1 :Text;
}

struct ResultBatch {
  jobId @0 :UInt64;
  results @1 :List(ChunkPartial);
  failures @2 :List(ChunkFailure);
  busySeconds @3 :Float64;     # backend compute time for these chunks
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
  }
}
