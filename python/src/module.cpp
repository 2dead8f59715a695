// psched._native: libpclient for Python. A thin layer: the public pclient API with the GIL released
// while it waits on the network, Ctrl-C and another thread's cancel turned into RunOptions'
// should_cancel, and pclient's errors as Python exceptions. Arrays, futures and LocalCluster are
// pure Python (python/psched/).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "app/process.h"
#include "client/figures.h"
#include "client/job_spec_of.h"
#include "client/local_cluster_children.h"
#include "client/result_json.h"
#include "client/workers_state.h"
#include "core/worker_info_json.h"
#include "net/token.h"
#include "pclient/client.h"

namespace py = pybind11;

namespace {

// Set from any thread (Future.cancel()); read by the thread blocked in run().
class CancelFlag {
 public:
  void set() { flag_.store(true); }
  bool is_set() const { return flag_.load(); }

 private:
  std::atomic<bool> flag_{false};
};

// The JSON writers' calls (core/json_out.h: begin_object, key, value, ...) building Python
// objects: so the Python client shows a worker (core/worker_info_json.h) and a job result
// (client/result_json.h) with the keys pbench's --json has, from the same writer. Floats stay
// floats: a NaN or infinite sum is float('nan') or inf here, where JSON text has null.
class PyOut {
 public:
  PyOut& begin_object() { return open(py::dict()); }
  PyOut& end_object() { return close(); }
  PyOut& begin_array() { return open(py::list()); }
  PyOut& end_array() { return close(); }
  PyOut& key(std::string_view k) {
    key_ = std::string(k);
    return *this;
  }
  PyOut& null() { return place(py::none()); }
  PyOut& value(std::nullptr_t) { return null(); }
  // Names come from peers: bytes that are not UTF-8 become U+FFFD, as in the JSON text.
  PyOut& value(std::string_view s) {
    return place(py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace")));
  }
  PyOut& value(const std::string& s) { return value(std::string_view(s)); }
  PyOut& value(const char* s) { return value(std::string_view(s)); }
  template <typename T>
  PyOut& value(const T& v) {
    return place(py::cast(v));
  }
  py::object take() { return std::move(root_); }

 private:
  PyOut& open(py::object container) {
    place(container);
    open_.push_back(std::move(container));
    return *this;
  }
  PyOut& close() {
    open_.pop_back();
    return *this;
  }
  PyOut& place(py::object v) {
    if (open_.empty()) {
      root_ = std::move(v);
    } else if (py::isinstance<py::list>(open_.back())) {
      open_.back().cast<py::list>().append(v);
    } else {
      open_.back().cast<py::dict>()[py::str(key_)] = v;
    }
    return *this;
  }

  py::object root_;
  std::vector<py::object> open_;  // the containers being written, innermost last
  std::string key_;
};

// The keys psched's /api/status and pbench's --json give a worker (core/worker_info_json.h).
py::object worker_dict(const pclient::WorkerInfo& w) {
  PyOut out;
  out.begin_object();
  psched::write_worker_info_members(out, w);
  out.end_object();
  return out.take();
}

// One connection. pclient::Client is used by one thread at a time: calls from several Python
// threads queue on the mutex, taken with the GIL released so the others keep running.
class NativeClient {
 public:
  NativeClient(const std::string& address, const std::string& scheduler_file, const std::string& token,
               const std::string& name, int connect_timeout_ms, const std::string& tls_ca_file,
               const std::string& tls_cert_file, const std::string& tls_key_file, int reconnect_ms,
               int no_workers_timeout_ms)
      : no_workers_timeout_ms_(no_workers_timeout_ms) {
    pclient::ConnectOptions o;
    o.address = address;
    o.scheduler_file = scheduler_file;
    o.token = token;
    o.tls_ca_file = tls_ca_file;
    o.tls_cert_file = tls_cert_file;
    o.tls_key_file = tls_key_file;
    o.name = name;
    o.connect_timeout_ms = connect_timeout_ms;
    o.scheduler_file_timeout_ms = connect_timeout_ms;
    o.reconnect_ms = reconnect_ms;
    py::gil_scoped_release nogil;
    client_ = std::make_unique<pclient::Client>(pclient::Client::connect(o));
  }

  // `cancel` (if given) gives up the wait for the connection when it is raised (Cancelled).
  py::list workers(CancelFlag* cancel) {
    std::vector<pclient::WorkerInfo> list;
    {
      py::gil_scoped_release nogil;
      auto lock = take_connection([&] { return cancel && cancel->is_set(); }, 50);
      list = live().workers();
    }
    py::list out;
    for (const auto& w : list) out.append(worker_dict(w));
    return out;
  }

  // Runs the job, blocking, and returns the job result (client/result_json.h's document, as
  // dicts). on_progress(chunks_done, chunks_total) is called with the GIL held; `cancel` (if given)
  // stops the job from another thread; with interruptible, a Ctrl-C that arrives while waiting
  // (main thread only) cancels the job and is raised here. devices: the workers just before and
  // after the job are asked for (two round trips), so "devices" has each one's share of it.
  // ddof: var's and std's, when the job computes squares.
  py::object run(const pclient::Job& job, py::object on_progress, CancelFlag* cancel, bool interruptible,
                 double verify, bool devices, uint32_t ddof) {
    pclient::RunOptions options;
    options.verify = verify;
    options.no_workers_timeout_ms = no_workers_timeout_ms_;
    PyObject *err_type = nullptr, *err_value = nullptr, *err_tb = nullptr;  // a pending Ctrl-C
    pclient::WorkersShown shown;
    const bool has_progress = !on_progress.is_none();
    options.on_progress = [&](const pclient::Progress& p) {
      const std::string line = pclient::workers_state_line(p, shown);
      if (line.empty() && !has_progress) return;
      py::gil_scoped_acquire gil;
      try {
        // No worker left: said on sys.stderr (a notebook shows it), in pbench's words.
        if (!line.empty()) py::module_::import("sys").attr("stderr").attr("write")("psched: " + line + "\n");
        if (has_progress) on_progress(p.chunks_done, p.chunks_total);
      } catch (py::error_already_set& e) {
        // Ctrl-C lands in whatever Python code runs on the main thread: often this callback.
        if (interruptible && !err_type && e.matches(PyExc_KeyboardInterrupt)) {
          e.restore();
          PyErr_Fetch(&err_type, &err_value, &err_tb);
        } else {
          e.discard_as_unraisable("psched progress callback");  // a display problem, not the job's
        }
      }
    };
    if (cancel || interruptible) {
      options.should_cancel = [&] {
        if (cancel && cancel->is_set()) return true;
        if (!interruptible) return false;
        py::gil_scoped_acquire gil;
        if (err_type) return true;  // caught in the progress callback
        if (PyErr_CheckSignals() == 0) return false;
        PyErr_Fetch(&err_type, &err_value, &err_tb);
        return true;
      };
    }
    pclient::Result result;
    std::vector<pclient::WorkerInfo> before, after;
    try {
      py::gil_scoped_release nogil;
      // Jobs of one client run one at a time: a job queued behind others waits here, and is
      // cancelled here too (a Ctrl-C or cancel() must not wait for the jobs ahead of it).
      auto lock = take_connection([&] { return options.should_cancel && options.should_cancel(); },
                                  options.cancel_poll_ms);
      if (devices) before = live().workers();
      result = live().run(job, options);
      if (devices) after = live().workers();
    } catch (const pclient::Cancelled&) {
      if (err_type) {
        PyErr_Restore(err_type, err_value, err_tb);
        throw py::error_already_set();
      }
      throw;
    }
    PyOut out;
    pclient::write_result_json(out, {.job = job,
                                     .result = result,
                                     .seconds = result.wall_seconds,
                                     .before = devices ? &before : nullptr,
                                     .after = devices ? &after : nullptr,
                                     .ddof = ddof,
                                     .verify = verify > 0,
                                     .gpu_series = true});
    return out.take();
  }

  void close() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::timed_mutex> lock(mutex_);
    if (client_) client_->close();
    client_.reset();
  }

 private:
  // The connection, for one call: calls from several threads take turns, and one that waits
  // behind others gives up (Cancelled) once `cancelled()` says so, checked every poll_ms.
  template <typename Cancelled>
  std::unique_lock<std::timed_mutex> take_connection(Cancelled cancelled, int poll_ms) {
    std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
    while (!lock.try_lock_for(std::chrono::milliseconds(std::max(1, poll_ms))))
      if (cancelled()) throw pclient::Cancelled("cancelled while waiting for the client's connection");
    return lock;
  }

  pclient::Client& live() {
    if (!client_) throw pclient::Error("client is closed");
    return *client_;
  }
  std::timed_mutex mutex_;
  std::unique_ptr<pclient::Client> client_;
  int no_workers_timeout_ms_;  // RunOptions::no_workers_timeout_ms (0: never)
};

// The job description, as libpclient's Job, and the array in files it may sum (Input).
void bind_job(py::module_& m) {
  py::class_<pclient::Input>(m, "Input")
      .def(py::init<>())
      .def_readwrite("path", &pclient::Input::path)
      .def_readwrite("format", &pclient::Input::format)
      .def_readwrite("dtype", &pclient::Input::dtype)
      .def_readwrite("shape", &pclient::Input::shape)
      .def_readwrite("offset", &pclient::Input::offset)
      .def_readwrite("byte_order", &pclient::Input::byte_order);
  // What psched.array needs to describe an array in files before any job (storage/open.h reads the
  // header or metadata, never the data): its own shape and dtype, and the chunks a job gets by
  // default. The refusal is pclient::Error's one line, naming the path and what is wrong.
  m.def("open_array", [](const pclient::Input& in) {
    const psched::OpenedArray a = pclient::opened_array(in);
    py::dict d;
    d["shape"] = a.shape;
    d["rows"] = a.rows;
    d["cols"] = a.cols;
    d["chunk_rows"] = a.chunk_rows;
    d["chunk_cols"] = a.chunk_cols;
    d["dtype"] = psched::dtype_name(a.dtype);
    d["format"] = psched::source_kind_name(a.stored.kind);
    return d;
  });
  py::class_<pclient::Job>(m, "Job")
      .def(py::init<>())
      .def_readwrite("rows", &pclient::Job::rows)
      .def_readwrite("cols", &pclient::Job::cols)
      .def_readwrite("chunk_rows", &pclient::Job::chunk_rows)
      .def_readwrite("chunk_cols", &pclient::Job::chunk_cols)
      .def_readwrite("dtype", &pclient::Job::dtype)
      .def_readwrite("generator", &pclient::Job::generator)
      .def_readwrite("param0", &pclient::Job::param0)
      .def_readwrite("param1", &pclient::Job::param1)
      .def_readwrite("seed", &pclient::Job::seed)
      .def_readwrite("scale", &pclient::Job::scale)
      .def_readwrite("offset", &pclient::Job::offset)
      .def_readwrite("row_start", &pclient::Job::row_start)
      .def_readwrite("row_stop", &pclient::Job::row_stop)
      .def_readwrite("row_step", &pclient::Job::row_step)
      .def_readwrite("col_start", &pclient::Job::col_start)
      .def_readwrite("col_stop", &pclient::Job::col_stop)
      .def_readwrite("col_step", &pclient::Job::col_step)
      .def_readwrite("squares", &pclient::Job::squares)
      .def_readwrite("input", &pclient::Job::input)
      .def("validate", [](const pclient::Job& job) { pclient::validate(job); })
      .def("chunks", &pclient::Job::chunks)
      .def("bytes", &pclient::Job::bytes);
}

// The client and what cancels its calls.
void bind_client(py::module_& m) {
  py::class_<CancelFlag>(m, "CancelFlag")
      .def(py::init<>())
      .def("set", &CancelFlag::set)
      .def("is_set", &CancelFlag::is_set);

  py::class_<NativeClient>(m, "Client")
      .def(py::init<const std::string&, const std::string&, const std::string&, const std::string&, int,
                    const std::string&, const std::string&, const std::string&, int, int>(),
           py::arg("address"), py::arg("scheduler_file"), py::arg("token"), py::arg("name"),
           py::arg("connect_timeout_ms"), py::arg("tls_ca_file") = "", py::arg("tls_cert_file") = "",
           py::arg("tls_key_file") = "", py::arg("reconnect_ms") = 0,
           py::arg("no_workers_timeout_ms") = pclient::RunOptions::kDefaultNoWorkersTimeoutMs)
      .def("workers", &NativeClient::workers, py::arg("cancel") = nullptr)
      .def("run", &NativeClient::run, py::arg("job"), py::arg("on_progress") = py::none(),
           py::arg("cancel") = nullptr, py::arg("interruptible") = false, py::arg("verify") = 0.0,
           py::arg("devices") = true, py::arg("ddof") = 0)
      .def("close", &NativeClient::close);
}

// LocalCluster's processes, described, started and stopped as pbench's local mode does it, and the
// token file read as the binaries read it.
void bind_local_cluster(py::module_& m) {
  // LocalCluster's children, started as pbench starts its own: fork+exec with PR_SET_PDEATHSIG, so
  // a Python killed with -9 takes them along (the signal follows the thread that spawned them).
  m.def("spawn_child", [](const std::string& path, const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& env, const std::string& stderr_path) {
    psched::ChildSpec spec;
    spec.path = path;
    spec.args = args;
    spec.env = env;
    spec.stderr_path = stderr_path;
    spec.own_process_group = true;  // Ctrl-C in a terminal interrupts the job, not the cluster
    auto pid = psched::spawn_child(spec);
    if (!pid) throw pclient::Error(pid.message());
    return int(*pid);
  });
  m.def("stop_child", [](int pid, int grace_ms) {
    py::gil_scoped_release nogil;
    return psched::stop_child(pid, grace_ms);
  });
  m.def("child_exited", [](int pid) -> py::object {  // the wait status once it exited, else None
    int status = 0;
    if (!psched::wait_child(pid, 0, &status)) return py::none();
    return py::int_(status);
  });
  // psched and its workers as pbench's local mode starts them (client/local_cluster_children.h): a list
  // of (binary, args, env), psched first; LocalCluster (cluster.py) starts them.
  m.def("local_cluster_children",
        [](int gpus, int cpus, int threads_per_worker, const std::string& memory_limit, const std::string& token_file,
           const std::string& dashboard_address, const std::string& log_level, const std::vector<std::string>& tls,
           const std::string& scheduler_file) {
          pclient::LocalClusterOptions o;
          o.gpu_workers = gpus;
          o.cpu_workers = cpus;
          o.threads_per_worker = threads_per_worker;
          o.memory_limit = memory_limit;
          o.token_file = token_file;
          o.dashboard_address = dashboard_address;
          o.log_level = log_level;
          if (tls.size() == 3) o.tls = psched::TlsFiles{tls[0], tls[1], tls[2]};
          py::list out;
          for (const pclient::LocalChild& c : pclient::local_cluster_children(o, scheduler_file))
            out.append(py::make_tuple(c.binary, c.args, c.env));
          return out;
        });
  m.def("load_token", [](const std::string& path) {
    auto token = psched::load_token(path);
    if (!token) throw pclient::Error(token.message());
    return *token;
  });
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "libpclient for Python (use the psched package, not this module)";
  m.attr("version") = PSCHED_VERSION;
  // Cancelled after Error: translators are tried newest first, so the subclass is matched first.
  auto error = py::register_exception<pclient::Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<pclient::Cancelled>(m, "Cancelled", error.ptr());
  // client/figures.h's table: the figures a Reduction may name, in its order; squares: the workers
  // must sum squares (Job.squares); ddof: it takes x.NAME(ddof=...).
  py::list figures;
  for (const pclient::FigureDef& f : pclient::kFigures) {
    py::dict row;
    row["name"] = std::string(f.name);
    row["label"] = std::string(f.label);  // pbench's text line; "" for the "Sum: ..." line's
    row["squares"] = f.squares;
    row["ddof"] = f.ddof;
    figures.append(row);
  }
  m.attr("FIGURES") = figures;
  bind_job(m);
  bind_client(m);
  bind_local_cluster(m);
}
