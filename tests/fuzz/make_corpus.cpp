// Writes the seed inputs of the fuzz targets: make_corpus DIR writes DIR/fuzz_scheduler/*,
// DIR/fuzz_tls/*, DIR/fuzz_job_spec/* and DIR/fuzz_storage/*. Their output is kept in
// tests/fuzz/corpus/ (regenerate after a protocol change: build-fuzz/bin/make_corpus
// tests/fuzz/corpus; the TLS seeds and hello_worker come out different each time). Each of
// fuzz_scheduler's seeds is one conversation a peer could have with psched, so the fuzzer starts
// from messages the scheduler understands.
#include <blosc.h>
#include <capnp/any.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "core/job_spec.h"
#include "core/partial.h"
#include "fuzz_input.h"
#include "net/wire_convert.h"
#include "storage/npy.h"
#include "storage/zarr.h"

using namespace psched::fuzz;
namespace wire = psched::wire;

namespace {

psched::JobSpec small_job() {
  psched::JobSpec s;
  s.rows = s.cols = 8;
  s.chunk_rows = s.chunk_cols = 4;  // 4 chunks: a worker with 4 slots gets all of them
  s.generator = psched::Generator::kArange;
  s.param0 = 0;
  s.param1 = 1;
  s.row_sel = s.col_sel = {0, psched::kToEnd, 1};
  return s;
}

std::string submit(const psched::JobSpec& spec, bool partials = false, double verify = 0) {
  return flat_message([&](wire::Message::Builder m) {
    auto sub = m.initSubmit();
    sub.setTag(1);
    psched::to_wire(spec, sub.initSpec());
    sub.setWantPartials(partials);
    sub.setVerifyFraction(verify);
  });
}

std::string results(uint64_t job, uint64_t first, uint64_t n, uint64_t failed = UINT64_MAX) {
  return flat_message([&](wire::Message::Builder m) {
    auto b = m.initResultBatch();
    b.setJobId(job);
    b.setBusySeconds(0.001);
    auto list = b.initResults(uint32_t(n));
    psched::PartialSum p;
    p.sum = 1.0;
    p.count = 16;
    p.min = 0.0;
    p.max = 1.0;
    p.exact.add(1.0);
    for (uint64_t i = 0; i < n; ++i) psched::to_wire(first + i, p, list[uint32_t(i)]);
    if (failed != UINT64_MAX) {
      auto f = b.initFailures(1)[0];
      f.setChunk(failed);
      f.setMessage("device lost");
    }
  });
}

// A worker's answer to a GiveBack: chunks first .. first + n - 1 given back unstarted.
std::string returned(uint64_t job, uint64_t first, uint64_t n) {
  return flat_message([&](wire::Message::Builder m) {
    auto b = m.initResultBatch();
    b.setJobId(job);
    auto list = b.initReturned(1);
    list[0].setFirst(first);
    list[0].setCount(uint32_t(n));
  });
}

std::string simple(const std::function<void(wire::Message::Builder)>& fill) { return flat_message(fill); }

void write(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

std::string read(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path, std::ios::binary).rdbuf();
  return s.str();
}

// The ClientHello OpenSSL's client sends first (TLS 1.3, 1.2 allowed), caught in a memory BIO.
std::string client_hello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, BIO_new(BIO_s_mem()), out);
  SSL_connect(ssl);  // wants the ServerHello; the ClientHello is written
  char* bytes = nullptr;
  const long n = BIO_get_mem_data(out, &bytes);
  std::string hello(bytes, size_t(n > 0 ? n : 0));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

// fuzz_tls's seeds: raw bytes on the TLS port, and fuzz_scheduler's seeds (read back from `sched`)
// behind byte 0, which picks how the peers come (fuzz_tls.cpp): a TLS peer with the cluster's
// certificate (1; 6 capped at TLS 1.2), none (2), another CA's (3), an expired one (4).
void write_tls_seeds(const std::string& dir, const std::string& sched) {
  const std::string hello = client_hello();
  write(dir, "plain_client_hello", '\0' + hello);
  write(dir, "plain_half_client_hello", '\0' + hello.substr(0, hello.size() / 2));
  write(dir, "plain_hello_frame", '\0' + hello_frame(Role::kClient));
  const struct {
    char approach;
    const char* name;
    const char* seed;
  } behind_tls[] = {{1, "tls_client_session", "client_session"},
                    {1, "tls_worker_and_client", "worker_and_client"},
                    {6, "tls12_worker_and_client", "worker_and_client"},
                    {1, "tls_hello_worker", "hello_worker"},
                    {1, "tls_hello_wrong_token", "hello_wrong_token"},
                    {1, "tls_raw_half_frame", "raw_half_frame"},
                    {2, "no_cert_client_session", "client_session"},
                    {7, "no_cert_tls12_client_session", "client_session"},
                    {3, "other_ca_worker_and_client", "worker_and_client"},
                    {4, "expired_client_session", "client_session"}};
  for (const auto& s : behind_tls) write(dir, s.name, s.approach + read(sched + "/" + s.seed));
}

// fuzz_storage's seeds (the layout is in fuzz_storage.cpp): .npy headers and .zarray texts as we
// and numpy write them, type strings, and a chunk of 6000 bytes (750 doubles) as each codec stores
// it, blosc in blocks of 1024 bytes so that its ranges cross blocks.
void write_storage_seeds(const std::string& dir) {
  using psched::Compressor;
  const psched::ElementType f8{psched::DType::kFloat64, false}, i4be{psched::DType::kInt32, true};
  write(dir, "npy_v1", '\0' + psched::npy_header(f8, false, {10, 4}) + std::string(16, '\x01'));
  write(dir, "npy_fortran_3d", '\0' + psched::npy_header(i4be, true, {2, 3, 4}));
  {  // as numpy 1.24 writes a bool vector: version 1.0, a header of 118 bytes
    const std::string dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (7,), }";
    std::string npy = std::string("\x93NUMPY\x01", 7) + '\0' + char(118) + '\0' + dict;
    npy.append(118 - dict.size() - 1, ' ');
    write(dir, "npy_numpy_style", '\0' + npy + "\n" + std::string(7, '\1'));
  }
  psched::ZarrMeta meta;
  meta.type = f8;
  meta.shape = {100, 30};
  meta.chunks = {10, 30};
  for (Compressor c : {Compressor::kNone, Compressor::kZstd, Compressor::kBlosc}) {
    meta.compressor = c;
    meta.dimension_separator = c == Compressor::kZstd ? '/' : '.';
    write(dir, "zarray_" + std::to_string(int(c)), '\1' + psched::zarray_json(meta));
  }
  write(dir, "zarray_numpy_fill", std::string(1, '\1') + R"({"zarr_format": 2, "shape": [5], "chunks": [2],
    "dtype": ">u2", "order": "C", "filters": null, "fill_value": 65535, "compressor": {"id": "zstd", "level": 3}})");
  for (const char* t : {"<f8", ">i4", "|b1", "<u8", "<c16"})
    write(dir, std::string("typestr_") + (t + 1), '\2' + std::string(t));

  std::vector<double> elements(750);
  for (size_t i = 0; i < elements.size(); ++i) elements[i] = 0.5 * double(i) - 17;
  const size_t bytes = elements.size() * sizeof(double);
  auto header = [&](char mode, Compressor c, uint32_t a, uint32_t b) {
    std::string h(14, '\0');
    h[0] = mode;
    h[1] = char(c);
    for (int k = 0; k < 4; ++k) {
      h[2 + k] = char(((bytes - 1) >> (8 * k)) & 0xff);  // fuzz_storage adds the 1
      h[6 + k] = char((a >> (8 * k)) & 0xff);
      h[10 + k] = char((b >> (8 * k)) & 0xff);
    }
    return h;
  };
  meta.type = f8;
  for (Compressor c : {Compressor::kNone, Compressor::kZstd}) {
    meta.compressor = c;
    std::string chunk;
    if (!psched::zarr_encode(meta, elements.data(), bytes, chunk)) std::abort();
    write(dir, "decode_" + std::to_string(int(c)), header('\3', c, 0, 0) + chunk);
  }
  std::string blosc(bytes + BLOSC_MAX_OVERHEAD, '\0');
  const int n = blosc_compress_ctx(1, BLOSC_SHUFFLE, sizeof(double), bytes, elements.data(), blosc.data(),
                                   blosc.size(), "lz4", 1024, 1);
  if (n <= 0) std::abort();
  blosc.resize(size_t(n));
  write(dir, "decode_blosc", header('\3', Compressor::kBlosc, 0, 0) + blosc);
  write(dir, "blosc_ranges", header('\4', Compressor::kBlosc, 1000, 3000) + blosc);
  write(dir, "blosc_ranges_odd", header('\4', Compressor::kBlosc, 999, 4097) + blosc);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  const std::string root = argv[1];
  const std::string sched = root + "/fuzz_scheduler", tls = root + "/fuzz_tls", spec = root + "/fuzz_job_spec",
                    storage = root + "/fuzz_storage";
  for (const std::string& dir : {root, sched, tls, spec, storage}) mkdir(dir.c_str(), 0755);

  const std::string heartbeat = simple([](wire::Message::Builder m) { m.initHeartbeat().setMemoryUsedBytes(1); });
  const std::string goodbye = simple([](wire::Message::Builder m) { m.initGoodbye().setReason("done"); });

  // A client's whole session.
  {
    Input in;
    in.role_a = Role::kClient;
    in.records = {{false, submit(small_job(), true)},
                  {false, simple([](wire::Message::Builder m) { m.initClusterInfoRequest().setTag(7); })},
                  {false, heartbeat},
                  {false, simple([](wire::Message::Builder m) { m.initCancel().setJobId(1); })},
                  {false, goodbye}};
    write(sched, "client_session", encode_input(in));
  }
  // A burn's watcher: a status for the dashboard, a refused one (no worker name), the end.
  {
    Input in;
    in.role_a = Role::kClient;
    in.records = {{false, simple([](wire::Message::Builder m) {
                     auto b = m.initBurnStatus();
                     b.setTotalSeconds(60);
                     auto g = b.initGpus(1);
                     g[0].setWorker("gpu-0");
                     g[0].setVerdict(wire::BurnVerdict::FAIL);
                     g[0].setReason("chunk 7: its copy lost the vote");
                   })},
                  {false, simple([](wire::Message::Builder m) { m.initBurnStatus().initGpus(1); })},
                  {false, simple([](wire::Message::Builder m) { m.initBurnStatus().setEnded(true); })}};
    write(sched, "burn_status", encode_input(in));
  }
  // A worker (A) computes the job a client (B) submits: results, a failure, a retry.
  {
    Input in;
    in.role_a = Role::kWorker;
    in.role_b = Role::kClient;
    in.records = {{true, submit(small_job())},
                  {false, results(1, 0, 2)},
                  {false, heartbeat},
                  {false, results(1, 2, 1, 3)},
                  {false, results(1, 3, 1)},
                  {false, goodbye}};
    write(sched, "worker_and_client", encode_input(in));
  }
  // A verify job on one worker: first copies, then the copies (run on it again), then a late one.
  {
    Input in;
    in.role_a = Role::kWorker;
    in.role_b = Role::kClient;
    in.records = {{true, submit(small_job(), false, 1.0)},
                  {false, results(1, 0, 4)},
                  {false, results(1, 0, 2, 2)},
                  {false, results(1, 3, 1)},
                  {false, results(1, 0, 4)},
                  {false, goodbye}};
    write(sched, "worker_verify", encode_input(in));
  }
  // A verify job of 4-chunk blocks on one worker: a chunk of a block's copy fails while the copy's
  // other chunks are still out (the window holds only those), then the copy runs again.
  {
    psched::JobSpec spec = small_job();
    spec.cols = 512;  // 256 chunks: verify blocks of 4
    Input in;
    in.role_a = Role::kWorker;
    in.role_b = Role::kClient;
    in.records = {{true, submit(spec, false, 1.0)}, {false, results(1, 0, 4)},    {false, results(1, 0, 2, 2)},
                  {false, heartbeat},               {false, results(1, 3, 1)},    {false, results(1, 0, 4)},
                  {false, goodbye}};
    write(sched, "worker_verify_copy_fails", encode_input(in));
  }
  // A worker gives back chunks (a GiveBack's answer, unasked here): ones it holds, then ones it
  // does not, then none.
  {
    Input in;
    in.role_a = Role::kWorker;
    in.role_b = Role::kClient;
    in.records = {{true, submit(small_job())}, {false, returned(1, 2, 2)}, {false, returned(1, 0, 9)},
                  {false, returned(1, 0, 0)}, {false, results(1, 0, 4)}};
    write(sched, "worker_gives_back", encode_input(in));
  }
  // A worker's results for a chunk it was never given, and for a job that never was.
  {
    Input in;
    in.role_a = Role::kWorker;
    in.role_b = Role::kClient;
    in.records = {{true, submit(small_job())}, {false, results(1, 9, 1)}, {false, results(5, 0, 1)}};
    write(sched, "worker_bad_results", encode_input(in));
  }
  // A worker's failure whose message is a struct where Text belongs: reading it throws, and
  // nothing of the batch may have been applied by then (the scheduler fuzzer's 2026-11-30 find: a
  // one-chunk job's chunk was left running on a worker whose window no longer counted it).
  {
    psched::JobSpec one_chunk = small_job();
    one_chunk.chunk_rows = one_chunk.chunk_cols = 8;
    Input in;
    in.role_a = Role::kWorker;
    in.role_b = Role::kClient;
    in.records = {{true, submit(one_chunk)}, {false, simple([](wire::Message::Builder m) {
                     auto b = m.initResultBatch();
                     b.setJobId(1);
                     auto f = b.initFailures(1)[0];
                     f.setChunk(0);
                     capnp::toAny(f).getPointerSection()[0].initAs<wire::TaskRange>();
                   })}};
    write(sched, "worker_malformed_failure", encode_input(in));
  }
  // Hellos of all kinds as the first message: wrong token, wrong version, unknown role, worker.
  {
    Input in;
    in.records = {{false, simple([](wire::Message::Builder m) {
                     auto h = m.initHello();
                     h.setRole(wire::Role::WORKER);
                     h.setProtocolVersion(wire::PROTOCOL_VERSION);
                     h.setToken(kToken);
                     h.setName("w");
                     auto w = h.initWorker();
                     w.setSlots(2);
                     w.setBackend("cuda");
                     w.setDeviceName("GPU");
                   })},
                  {false, heartbeat}};
    write(sched, "hello_worker", encode_input(in));
    in.records = {{false, simple([](wire::Message::Builder m) {
                     auto h = m.initHello();
                     h.setRole(wire::Role::CLIENT);
                     h.setProtocolVersion(wire::PROTOCOL_VERSION);
                     h.setToken("wrong");
                   })}};
    write(sched, "hello_wrong_token", encode_input(in));
    in.records = {{false, simple([](wire::Message::Builder m) {
                     auto h = m.initHello();
                     h.setProtocolVersion(99);
                     h.setToken(kToken);
                   })}};
    write(sched, "hello_wrong_version", encode_input(in));
    in.records = {{false, submit(small_job())}};
    write(sched, "submit_before_hello", encode_input(in));
  }
  // Jobs the scheduler must refuse.
  {
    Input in;
    in.role_a = Role::kClient;
    psched::JobSpec nan = small_job();
    nan.param0 = std::numeric_limits<double>::quiet_NaN();
    psched::JobSpec zero = small_job();
    zero.row_sel.step = 0;
    psched::JobSpec huge = small_job();
    huge.chunk_rows = huge.chunk_cols = UINT64_MAX;
    in.records = {{false, submit(nan)}, {false, submit(zero)}, {false, submit(huge)}};
    write(sched, "client_bad_jobs", encode_input(in));
  }
  // Framing: a whole Hello then half of one; a length past the limit; a length not a multiple of 8.
  {
    Input in;
    in.raw = true;
    const std::string hello = hello_frame(Role::kClient);
    in.raw_bytes = hello + hello.substr(0, 10);
    write(sched, "raw_half_frame", encode_input(in));
    in.raw_bytes = std::string("\xff\xff\xff\x7f", 4);
    write(sched, "raw_huge_length", encode_input(in));
    in.raw_bytes = std::string("\x0d\x00\x00\x00", 4) + std::string(13, 'x');
    write(sched, "raw_odd_length", encode_input(in));
  }

  write_tls_seeds(tls, sched);

  // fuzz_job_spec reads its fields with FuzzedDataProvider: any bytes are a spec. A few shapes.
  write(spec, "zeros", std::string(96, '\0'));
  write(spec, "ones", std::string(96, '\x01'));
  write(spec, "ramp", [] {
    std::string s;
    for (int i = 0; i < 128; ++i) s.push_back(char(i * 37));
    return s;
  }());
  write(spec, "high", std::string(96, '\xff'));
  write_storage_seeds(storage);
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
