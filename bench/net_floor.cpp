// net-floor: what the kernel's TCP loopback costs a fleet of N workers per job, with no scheduler
// and no worker logic: the floor under bench/scale.sh's short jobs on this machine.
//
// N loopback TCP connections. One thread (the scheduler's end, pinned to --scheduler-cpu) writes a
// message to every connection, then reads one reply from each; another (the workers' end, pinned
// to --workers-cpu, one epoll loop as psched-loadgen's) answers each message as it arrives. The
// message sizes default to what psched and a worker exchange for one job (DefineJob with its
// TaskBatch, then one ResultBatch). A job on N workers cannot end before its last worker is sent
// its work, so a job of ideal time T takes at least T + sends_s here (equal shares), whatever the
// scheduler does; round_s is the whole exchange with workers that answer at once.
// Output: "figure NAME VALUE" lines (the best of --rounds), as psched-loadgen prints them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  unsigned connections = 1024;
  unsigned to_worker = 288;     // bytes psched sends a worker for a job (DefineJob + TaskBatch)
  unsigned to_scheduler = 268;  // bytes of the worker's ResultBatch
  unsigned rounds = 20;
  int scheduler_cpu = 0, workers_cpu = 1;  // -1: not pinned
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "net-floor: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

void pin_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) die("cannot pin to CPU " + std::to_string(cpu));
}

void tune(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) die("TCP_NODELAY");
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) die("O_NONBLOCK");
}

// The two ends of each of n loopback connections: [scheduler's, worker's].
std::pair<std::vector<int>, std::vector<int>> connect_pairs(unsigned n) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, SOMAXCONN) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    die("cannot listen on loopback");
  std::vector<int> scheduler_end, worker_end;
  for (unsigned i = 0; i < n; ++i) {
    const int w = socket(AF_INET, SOCK_STREAM, 0);
    if (w < 0 || connect(w, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      die("connection " + std::to_string(i + 1) + " of " + std::to_string(n));
    const int s = accept(listener, nullptr, nullptr);
    if (s < 0) die("accept");
    tune(w);
    tune(s);
    worker_end.push_back(w);
    scheduler_end.push_back(s);
  }
  close(listener);
  return {scheduler_end, worker_end};
}

int epoll_of(const std::vector<int>& fds) {
  const int ep = epoll_create1(0);
  if (ep < 0) die("epoll_create1");
  for (size_t i = 0; i < fds.size(); ++i) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u32 = uint32_t(i);
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e) != 0) die("epoll_ctl");
  }
  return ep;
}

// Reads what is there; returns the bytes read (0 when nothing was). A read that did not fill the
// buffer emptied the socket, and epoll (level-triggered) says when more comes: no second read
// that finds it empty, as psched makes none (FramedConnection::read_more).
size_t drain(int fd, std::vector<char>& buf) {
  size_t got = 0;
  for (;;) {
    const ssize_t r = read(fd, buf.data(), buf.size());
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) die("read");
    if (r > 0) got += size_t(r);
    if (r < ssize_t(buf.size())) return got;
  }
}

void write_all(int fd, const std::vector<char>& msg) {
  size_t off = 0;
  while (off < msg.size()) {
    const ssize_t w = write(fd, msg.data() + off, msg.size() - off);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) die("write");
    if (w > 0) off += size_t(w);
  }
}

// The workers' end: answers every whole message with a reply, until `total` messages came.
void workers(const Args& a, const std::vector<int>& fds, uint64_t total) {
  pin_to(a.workers_cpu);
  const int ep = epoll_of(fds);
  std::vector<char> buf(65536), reply(a.to_scheduler, 'r');
  std::vector<uint64_t> pending(fds.size(), 0);  // bytes of the message being read
  std::vector<epoll_event> events(256);
  for (uint64_t answered = 0; answered < total;) {
    const int k = epoll_wait(ep, events.data(), int(events.size()), -1);
    if (k < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < k; ++i) {
      const uint32_t c = events[size_t(i)].data.u32;
      pending[c] += drain(fds[c], buf);
      for (; pending[c] >= a.to_worker; pending[c] -= a.to_worker, ++answered) write_all(fds[c], reply);
    }
  }
  close(ep);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"net-floor: the kernel's TCP loopback cost of one message each way per worker"};
  app.add_option("-w,--connections", a.connections, "worker connections")->check(CLI::Range(1u, 100000u));
  app.add_option("--to-worker", a.to_worker, "bytes sent to each worker")->check(CLI::Range(1u, 1u << 20));
  app.add_option("--to-scheduler", a.to_scheduler, "bytes of each reply")->check(CLI::Range(1u, 1u << 20));
  app.add_option("--rounds", a.rounds, "rounds (the best is printed)")->check(CLI::Range(1u, 100000u));
  app.add_option("--scheduler-cpu", a.scheduler_cpu, "CPU of the scheduler's end (-1: not pinned)");
  app.add_option("--workers-cpu", a.workers_cpu, "CPU of the workers' end (-1: not pinned)");
  CLI11_PARSE(app, argc, argv);

  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  auto [scheduler_end, worker_end] = connect_pairs(a.connections);
  std::thread answering(workers, std::cref(a), std::cref(worker_end), uint64_t(a.connections) * a.rounds);
  pin_to(a.scheduler_cpu);
  const int ep = epoll_of(scheduler_end);
  const std::vector<char> msg(a.to_worker, 'm');
  std::vector<char> buf(65536);
  std::vector<epoll_event> events(256);
  double best_sends = 1e300, best_round = 1e300;
  for (unsigned r = 0; r < a.rounds; ++r) {
    const auto t0 = Clock::now();
    for (const int fd : scheduler_end) write_all(fd, msg);
    const double sends = std::chrono::duration<double>(Clock::now() - t0).count();
    const uint64_t want = uint64_t(a.connections) * a.to_scheduler;
    for (uint64_t got = 0; got < want;) {
      const int k = epoll_wait(ep, events.data(), int(events.size()), -1);
      if (k < 0 && errno != EINTR) die("epoll_wait");
      for (int i = 0; i < k; ++i) got += drain(scheduler_end[events[size_t(i)].data.u32], buf);
    }
    best_sends = std::min(best_sends, sends);
    best_round = std::min(best_round, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  answering.join();
  std::printf("figure net_floor_connections %u\n", a.connections);
  std::printf("figure net_floor_sends_s %.6f\n", best_sends);
  std::printf("figure net_floor_round_s %.6f\n", best_round);
  std::printf("net-floor: %u connections, %u B out and %u B back each: sends %.2f ms (%.2f us each), round %.2f ms "
              "(best of %u)\n",
              a.connections, a.to_worker, a.to_scheduler, best_sends * 1e3, best_sends * 1e6 / a.connections,
              best_round * 1e3, a.rounds);
  return 0;
}
