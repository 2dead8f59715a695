#include "net/wire_convert.h"

#include <fmt/format.h>

namespace psched {

namespace {

void slice_to_wire(const Slice& s, wire::Slice::Builder out) {
  out.setStart(s.start);
  out.setStop(s.stop);
  out.setStep(s.step);
}

Slice slice_from_wire(wire::Slice::Reader in) { return Slice{in.getStart(), in.getStop(), in.getStep()}; }

}  // namespace

wire::Hello::Builder init_hello(wire::Message::Builder message, wire::Role role, const std::string& name,
                                const std::string& token) {
  auto hello = message.initHello();
  hello.setRole(role);
  hello.setProtocolVersion(wire::PROTOCOL_VERSION);
  hello.setName(name);
  hello.setToken(token);
  return hello;
}

void to_wire(const JobSpec& s, wire::JobSpec::Builder out) {
  out.setRows(s.rows);
  out.setCols(s.cols);
  out.setChunkRows(s.chunk_rows);
  out.setChunkCols(s.chunk_cols);
  out.setDtype(static_cast<wire::DType>(s.dtype));
  out.setGenerator(static_cast<wire::Generator>(s.generator));
  out.setParam0(s.param0);
  out.setParam1(s.param1);
  out.setSeed(s.seed);
  out.setScale(s.scale);
  out.setOffset(s.offset);
  slice_to_wire(s.row_sel, out.initRowSel());
  slice_to_wire(s.col_sel, out.initColSel());
  out.setFused(s.fused);
  out.setSquares(s.squares);
  if (s.stored.stored()) to_wire(s.stored, out.initSource());
}

void to_wire(const StoredArray& a, wire::StoredArray::Builder out) {
  out.setKind(static_cast<wire::SourceKind>(a.kind));
  out.setPath(a.path);
  out.setBigEndian(a.big_endian);
  out.setFortranOrder(a.fortran_order);
  out.setDataOffset(a.data_offset);
  auto files = out.initFiles(uint32_t(a.files.size()));
  for (size_t i = 0; i < a.files.size(); ++i) {
    auto f = files[uint32_t(i)];
    f.setName(a.files[i].name);
    f.setRows(a.files[i].rows);
    f.setDataOffset(a.files[i].data_offset);
    f.setFortranOrder(a.files[i].fortran_order);
  }
  out.setStoreChunkRows(a.store_chunk_rows);
  out.setStoreChunkCols(a.store_chunk_cols);
  out.setCompressor(static_cast<wire::Compressor>(a.compressor));
  out.setFillBits(a.fill_bits);
  out.setDimensionSeparator(uint8_t(a.dimension_separator));
  out.setOneDimensional(a.one_dimensional);
  out.setNoFillValue(!a.has_fill_value);
}

StoredArray from_wire(wire::StoredArray::Reader in) {
  StoredArray a;
  // Unknown enumerants keep their code (255 for any above) so that validate() names them.
  const auto k = static_cast<uint16_t>(in.getKind());
  a.kind = static_cast<SourceKind>(k > 255 ? 255 : k);
  a.path = in.getPath();
  a.big_endian = in.getBigEndian();
  a.fortran_order = in.getFortranOrder();
  a.data_offset = in.getDataOffset();
  for (auto f : in.getFiles())
    a.files.push_back(StackFile{f.getName(), f.getRows(), f.getDataOffset(), f.getFortranOrder()});
  a.store_chunk_rows = in.getStoreChunkRows();
  a.store_chunk_cols = in.getStoreChunkCols();
  const auto c = static_cast<uint16_t>(in.getCompressor());
  a.compressor = static_cast<Compressor>(c > 255 ? 255 : c);
  a.fill_bits = in.getFillBits();
  a.dimension_separator = char(in.getDimensionSeparator());
  a.one_dimensional = in.getOneDimensional();
  a.has_fill_value = !in.getNoFillValue();
  return a;
}

JobSpec from_wire(wire::JobSpec::Reader in) {
  JobSpec s;
  s.rows = in.getRows();
  s.cols = in.getCols();
  s.chunk_rows = in.getChunkRows();
  s.chunk_cols = in.getChunkCols();
  // Unknown enumerants (a newer or hostile peer) keep their code (255 stands for any above) so that
  // validate() rejects them naming it.
  const auto d = static_cast<uint16_t>(in.getDtype());
  s.dtype = static_cast<DType>(d > 255 ? 255 : d);
  const auto g = static_cast<uint16_t>(in.getGenerator());
  s.generator = static_cast<Generator>(g > 255 ? 255 : g);
  s.param0 = in.getParam0();
  s.param1 = in.getParam1();
  s.seed = in.getSeed();
  s.scale = in.getScale();
  s.offset = in.getOffset();
  s.row_sel = slice_from_wire(in.getRowSel());
  s.col_sel = slice_from_wire(in.getColSel());
  s.fused = in.getFused();
  s.squares = in.getSquares();
  if (in.hasSource()) s.stored = from_wire(in.getSource());
  return s;
}

void to_wire(const ExactTerms& e, wire::ExactSum::Builder out) {
  auto list = out.initTerms(uint32_t(e.size()));
  for (size_t i = 0; i < e.size(); ++i) list.set(uint32_t(i), e.data()[i]);
  out.setNan(e.nan);
  out.setPosInf(e.pos_inf);
  out.setNegInf(e.neg_inf);
}

void to_wire(const ExactSum& e, wire::ExactSum::Builder out) { to_wire(ExactTerms(e), out); }

void add_from_wire(wire::ExactSum::Reader in, ExactSum& e) {
  // A frame holds at most 2^21 terms, far below the 2^31 adds a digit takes before normalising.
  for (double t : in.getTerms()) e.add(t);
  e.nan += in.getNan();
  e.pos_inf += in.getPosInf();
  e.neg_inf += in.getNegInf();
}

ExactSum from_wire(wire::ExactSum::Reader in) {
  ExactSum e;
  add_from_wire(in, e);
  return e;
}

namespace {

template <typename Partial>
void partial_to_wire(uint64_t chunk, const Partial& p, const ExactTerms& exact, const ExactTerms* squares,
                     wire::ChunkPartial::Builder out) {
  out.setChunk(chunk);
  out.setSum(p.sum);
  out.setCount(p.count);
  out.setMin(p.min);
  out.setMax(p.max);
  to_wire(exact, out.initExact());
  if (squares) to_wire(*squares, out.initSquares());
}

}  // namespace

void to_wire(uint64_t chunk, const CompactPartial& p, wire::ChunkPartial::Builder out) {
  partial_to_wire(chunk, p, p.exact, p.has_squares ? &p.squares : nullptr, out);
}

void to_wire(uint64_t chunk, const PartialSum& p, wire::ChunkPartial::Builder out) {
  const ExactTerms squares = p.has_squares ? ExactTerms(p.squares) : ExactTerms();
  partial_to_wire(chunk, p, ExactTerms(p.exact), p.has_squares ? &squares : nullptr, out);
}

namespace {

// ChunkPartial and JobResult name these fields alike.
template <typename Reader>
PartialSum partial_from_wire(Reader in) {
  PartialSum p;
  p.sum = in.getSum();
  p.count = in.getCount();
  p.min = in.getMin();
  p.max = in.getMax();
  add_from_wire(in.getExact(), p.exact);
  p.has_squares = in.hasSquares();
  if (p.has_squares) add_from_wire(in.getSquares(), p.squares);
  return p;
}

}  // namespace

PartialSum from_wire(wire::ChunkPartial::Reader in) { return partial_from_wire(in); }
PartialSum from_wire(wire::JobResult::Reader in) { return partial_from_wire(in); }

void to_wire(const GpuHealth& h, wire::GpuHealth::Builder out) {
  out.setUuid(h.uuid);
  out.setPciBusId(h.pci_bus_id);
  out.setSamples(h.samples);
  out.setSmUtilisationPct(h.sm_utilisation_pct);
  out.setMemUtilisationPct(h.mem_utilisation_pct);
  out.setMemoryUsedBytes(h.memory_used_bytes);
  out.setMemoryTotalBytes(h.memory_total_bytes);
  out.setSmClockMhz(h.sm_clock_mhz);
  out.setSmClockMinMhz(h.sm_clock_min_mhz);
  out.setSmClockMaxMhz(h.sm_clock_max_mhz);
  out.setTemperatureC(h.temperature_c);
  out.setPowerWatts(h.power_watts);
  out.setPowerLimitWatts(h.power_limit_watts);
  out.setThrottleReasons(h.throttle_reasons);
  out.setEccCorrected(h.ecc_corrected);
  out.setEccUncorrected(h.ecc_uncorrected);
  out.setEccSupported(h.ecc_supported);
  out.setPcieGeneration(h.pcie_generation);
  out.setPcieWidth(h.pcie_width);
  out.setPcieMaxWidth(h.pcie_max_width);
  out.setPcieMaxGeneration(h.pcie_max_generation);
  out.setRemapSupported(h.remap_supported);
  out.setRemappedRowsCorrected(h.remapped_rows_corrected);
  out.setRemappedRowsUncorrected(h.remapped_rows_uncorrected);
  out.setRemapPending(h.remap_pending);
  out.setRemapFailed(h.remap_failed);
  out.setRetiredSupported(h.retired_supported);
  out.setRetiredPagesSbe(h.retired_pages_sbe);
  out.setRetiredPagesDbe(h.retired_pages_dbe);
  out.setRetiredPending(h.retired_pending);
}

namespace {

StatusOr<BurnVerdict> verdict_from_wire(wire::BurnVerdict v) {
  switch (v) {
    case wire::BurnVerdict::PASS: return BurnVerdict::kPass;
    case wire::BurnVerdict::WARN: return BurnVerdict::kWarn;
    case wire::BurnVerdict::FAIL: return BurnVerdict::kFail;
  }
  return Status::invalid(fmt::format("burn status: verdict {} unknown (expected pass, warn or fail)", unsigned(v)));
}

}  // namespace

StatusOr<BurnStatus> burn_status_from_wire(wire::BurnStatus::Reader in) {
  const auto gpus = in.getGpus();
  if (gpus.size() > kMaxBurnGpus)
    return Status::invalid(fmt::format("burn status: {} GPUs, at most {}", gpus.size(), kMaxBurnGpus));
  BurnStatus b;
  StatusOr<BurnVerdict> verdict = verdict_from_wire(in.getVerdict());
  if (!verdict) return verdict.status();
  b.verdict = verdict.value();
  b.elapsed_seconds = in.getElapsedSeconds();
  b.total_seconds = in.getTotalSeconds();
  b.ended = in.getEnded();
  b.gpus.reserve(gpus.size());
  for (auto g : gpus) {
    BurnGpuStatus& out = b.gpus.emplace_back();
    StatusOr<BurnVerdict> v = verdict_from_wire(g.getVerdict());
    if (!v) return v.status();
    out.verdict = v.value();
    // Text is copied only once its size is known to be small: validate() refuses what is long.
    const auto worker = g.getWorker(), reason = g.getReason();
    if (worker.size() > kMaxPeerNameBytes || reason.size() > kMaxBurnReasonBytes)
      return Status::invalid(fmt::format("burn status: a worker name of {} bytes or a reason of {}, at most {} and {}",
                                         worker.size(), reason.size(), kMaxPeerNameBytes, kMaxBurnReasonBytes));
    out.worker.assign(worker.cStr(), worker.size());
    out.reason.assign(reason.cStr(), reason.size());
    out.bytes_per_second = g.getBytesPerSecond();
    out.chunks = g.getChunks();
    out.mismatches = g.getMismatches();
    out.gone = g.getGone();
  }
  if (Status st = validate(b); !st) return st;
  return b;
}

GpuHealth from_wire(wire::GpuHealth::Reader in) {
  GpuHealth h;
  read_gpu_health(in, h);
  return h;
}

void to_wire(const WorkerInfo& w, wire::WorkerInfo::Builder out) {
  out.setId(w.id);
  out.setName(w.name);
  out.setHost(w.host);
  out.setPid(w.pid);
  out.setBackend(w.backend);
  out.setDeviceName(w.device_name);
  out.setMemoryTotalBytes(w.memory_total_bytes);
  out.setMemoryLimitBytes(w.memory_limit_bytes);
  out.setComputeMajor(w.compute_major);
  out.setComputeMinor(w.compute_minor);
  out.setThreads(w.threads);
  out.setSlots(w.slots);
  out.setReaders(w.readers);
  out.setWindowElements(w.window_elements);
  out.setChunksDone(w.chunks_done);
  out.setBytesReduced(w.bytes_reduced);
  out.setBusySeconds(w.busy_seconds);
  out.setCpuAffinity(w.cpu_affinity);
  if (w.gpu) to_wire(*w.gpu, out.initGpu());
}

WorkerInfo from_wire(wire::WorkerInfo::Reader in) {
  WorkerInfo w;
  read_worker_info(in, w);
  return w;
}

}  // namespace psched
