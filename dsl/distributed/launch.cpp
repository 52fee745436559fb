#include "dsl/distributed/launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "dsl/error.h"

namespace kiln::distributed {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  KILN_CHECK(fd >= 0, "kiln run: socket failed: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  KILN_CHECK(ok, "kiln run: no free TCP port on 127.0.0.1: ", std::strerror(errno));
  return ntohs(a.sin_port);
}

namespace {

struct Rank {
  pid_t pid = -1;
  int out = -1, err = -1;            // read ends of the child's stdout and stderr
  std::string out_line, err_line;    // partial lines not yet forwarded
  bool exited = false;
  int status = 0;
};

// Forwards what fd has (whole lines, each prefixed); false at end of file.
bool forward(int& fd, std::string& partial, FILE* to, const std::string& prefix) {
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!partial.empty()) std::fprintf(to, "%s%s\n", prefix.c_str(), partial.c_str());
    partial.clear();
    ::close(fd);
    fd = -1;
    return false;
  }
  partial.append(buf, size_t(n));
  size_t start = 0;
  for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1)
    std::fprintf(to, "%s%.*s\n", prefix.c_str(), int(nl - start), partial.data() + start);
  partial.erase(0, start);
  std::fflush(to);
  return true;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int launch(const std::vector<std::string>& argv, const LaunchOptions& options) {
  KILN_CHECK(!argv.empty(), "kiln run: name the program to start");
  KILN_CHECK(options.nproc >= 1, "kiln run: --nproc must be at least 1 (got ", options.nproc, ")");
  std::string port = std::to_string(free_port());
  std::vector<Rank> ranks(size_t(options.nproc));
  for (int r = 0; r < options.nproc; ++r) {
    int out[2], err[2];
    KILN_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0, "kiln run: pipe failed");
    pid_t pid = ::fork();
    KILN_CHECK(pid >= 0, "kiln run: fork failed: ", std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);  // a process group per rank: stopping a rank stops what it started
      ::dup2(out[1], 1), ::dup2(err[1], 2);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(options.nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      if (options.one_gpu_each) ::setenv("CUDA_VISIBLE_DEVICES", std::to_string(r).c_str(), 1);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "kiln run: cannot start %s: %s\n", argv[0].c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // as the child does: whichever runs first (no window for a lost signal)
    ::close(out[1]), ::close(err[1]);
    ranks[size_t(r)] = {pid, out[0], err[0], "", "", false, 0};
  }

  int failure = 0;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  bool killed = false;
  for (;;) {
    std::vector<pollfd> fds;
    for (const Rank& k : ranks) {
      if (k.out >= 0) fds.push_back({k.out, POLLIN, 0});
      if (k.err >= 0) fds.push_back({k.err, POLLIN, 0});
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 100);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (size_t r = 0; r < ranks.size(); ++r) {
      Rank& k = ranks[r];
      std::string prefix = options.prefix_output ? "[rank " + std::to_string(r) + "] " : "";
      for (const pollfd& p : fds) {
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (p.fd == k.out && k.out >= 0) forward(k.out, k.out_line, stdout, prefix);
        if (p.fd == k.err && k.err >= 0) forward(k.err, k.err_line, stderr, prefix);
      }
      if (!k.exited && ::waitpid(k.pid, &k.status, WNOHANG) == k.pid) {
        k.exited = true;
        if (exit_code(k.status) != 0 && failure == 0) {
          failure = exit_code(k.status);
          std::fprintf(stderr, "kiln run: rank %zu exited with status %d; stopping the other ranks\n", r, failure);
          for (const Rank& o : ranks) ::kill(-o.pid, SIGTERM);
          stop_deadline = std::chrono::steady_clock::now() + options.grace;
        }
      }
    }
    bool all_exited = true, all_closed = true;
    for (const Rank& k : ranks) {
      all_exited = all_exited && k.exited;
      all_closed = all_closed && k.out < 0 && k.err < 0;
    }
    if (all_exited && all_closed) break;
    // Every rank exited but something they started still holds their output open: after a
    // failure, stop waiting for it once the grace period is over.
    if (all_exited && failure != 0 && killed) {
      for (Rank& k : ranks) {
        if (k.out >= 0) ::close(k.out), k.out = -1;
        if (k.err >= 0) ::close(k.err), k.err = -1;
      }
      break;
    }
    if (!killed && std::chrono::steady_clock::now() > stop_deadline) {
      for (const Rank& o : ranks) ::kill(-o.pid, SIGKILL);
      killed = true;
    }
  }
  return failure;
}

}  // namespace kiln::distributed
