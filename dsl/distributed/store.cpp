#include "dsl/distributed/store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "dsl/error.h"

namespace kiln::distributed {

namespace {

// A message: op (1 byte), key length and value length (4 bytes each), key, value. Replies are a
// value (length, bytes).
constexpr char kSet = 's', kGet = 'g', kAdd = 'a';

using Clock = std::chrono::steady_clock;

// Reads or writes exactly n bytes before `deadline`; false when the peer closed the connection.
bool io_all(int fd, char* data, size_t n, bool write, Clock::time_point deadline, const std::string& what) {
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    KILN_CHECK(left > 0, what, ": timed out");
    pollfd p{fd, short(write ? POLLOUT : POLLIN), 0};
    int r = ::poll(&p, 1, int(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    KILN_CHECK(r >= 0, what, ": poll failed: ", std::strerror(errno));
    if (r == 0) continue;
    ssize_t k = write ? ::send(fd, data, n, MSG_NOSIGNAL) : ::recv(fd, data, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return false;
    data += k, n -= size_t(k);
  }
  return true;
}

void put_u32(std::vector<char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(p[i])) << (8 * i);
  return v;
}

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int r = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  KILN_CHECK(r == 0 && res, "rendezvous: cannot resolve MASTER_ADDR '", host, "': ", gai_strerror(r));
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  a.sin_port = htons(uint16_t(port));
  return a;
}

}  // namespace

// The server: one thread polling the listening socket and its clients; a get of a key not yet
// set waits in `waiting` until a set of it arrives.
struct Store::Server {
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // the destructor writes here to stop the thread
  std::thread thread;
  std::map<std::string, std::vector<char>> values;
  std::multimap<std::string, int> waiting;  // key -> client fd

  Server(const std::string& host, int port) {
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    KILN_CHECK(listen_fd >= 0, "rendezvous: socket failed: ", std::strerror(errno));
    int one = 1;
    ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = resolve(host, port);
    if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd, 128) != 0) {
      std::string why = std::strerror(errno);
      ::close(listen_fd);
      throw_error("rendezvous: rank 0 cannot serve the store at ", host, ":", port, ": ", why,
                  " (another job on MASTER_PORT? `kiln run` picks a free port)");
    }
    KILN_CHECK(::pipe2(wake, O_CLOEXEC) == 0, "rendezvous: pipe failed");
    thread = std::thread([this] { loop(); });
  }
  ~Server() {
    char c = 0;
    (void)!::write(wake[1], &c, 1);
    thread.join();
    ::close(listen_fd), ::close(wake[0]), ::close(wake[1]);
  }

  static void reply(int fd, const std::vector<char>& value) {
    std::vector<char> out;
    put_u32(out, uint32_t(value.size()));
    out.insert(out.end(), value.begin(), value.end());
    // Replies are small; a client that stopped reading is dropped by its own timeout.
    (void)io_all(fd, out.data(), out.size(), true, Clock::now() + std::chrono::seconds(10), "rendezvous reply");
  }

  // Handles one message from fd; false when the client is gone.
  bool serve(int fd) {
    char head[9];
    auto deadline = Clock::now() + std::chrono::seconds(30);
    try {
      if (!io_all(fd, head, 9, false, deadline, "rendezvous server")) return false;
      std::string key(get_u32(head + 1), '\0');
      std::vector<char> value(get_u32(head + 5));
      if (!io_all(fd, key.data(), key.size(), false, deadline, "rendezvous server") ||
          !io_all(fd, value.data(), value.size(), false, deadline, "rendezvous server"))
        return false;
      if (head[0] == kSet) {
        values[key] = value;
        reply(fd, {});
        auto [b, e] = waiting.equal_range(key);
        for (auto it = b; it != e; ++it) reply(it->second, value);
        waiting.erase(b, e);
      } else if (head[0] == kGet) {
        auto it = values.find(key);
        if (it != values.end()) reply(fd, it->second);
        else waiting.emplace(key, fd);
      } else if (head[0] == kAdd) {
        int64_t delta = 0, sum = 0;
        std::memcpy(&delta, value.data(), std::min(value.size(), sizeof delta));
        std::vector<char>& v = values[key];
        if (v.size() == sizeof sum) std::memcpy(&sum, v.data(), sizeof sum);
        sum += delta;
        v.assign(reinterpret_cast<char*>(&sum), reinterpret_cast<char*>(&sum) + sizeof sum);
        reply(fd, v);
      } else {
        return false;
      }
      return true;
    } catch (const Error&) {
      return false;
    }
  }

  void loop() {
    std::vector<int> clients;
    for (;;) {
      std::vector<pollfd> fds{{wake[0], POLLIN, 0}, {listen_fd, POLLIN, 0}};
      for (int c : clients) fds.push_back({c, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) clients.push_back(c);
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        int c = fds[i].fd;
        if (!serve(c)) {
          for (auto it = waiting.begin(); it != waiting.end();) it = it->second == c ? waiting.erase(it) : ++it;
          clients.erase(std::find(clients.begin(), clients.end(), c));
          ::close(c);
        }
      }
    }
    for (int c : clients) ::close(c);
  }
};

Store::Store(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout)
    : host_(host), port_(port), timeout_(timeout) {
  KILN_CHECK(port > 0 && port < 65536, "rendezvous: MASTER_PORT ", port, " is not a TCP port (1-65535)");
  if (serve) server_ = std::make_unique<Server>(host, port);
  sockaddr_in a = resolve(host, port);
  auto deadline = Clock::now() + timeout;
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    KILN_CHECK(fd_ >= 0, "rendezvous: socket failed: ", std::strerror(errno));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) break;
    std::string why = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    KILN_CHECK(Clock::now() < deadline, "rendezvous: no store at ", address(), " after ",
               timeout.count() / 1000.0, " s (", why, "): is rank 0 running, with the same MASTER_ADDR and MASTER_PORT?");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Store::~Store() {
  if (fd_ >= 0) ::close(fd_);
}

std::string Store::address() const { return host_ + ":" + std::to_string(port_); }

std::vector<char> Store::request(char op, const std::string& key, const std::vector<char>& value) {
  std::vector<char> out{op};
  put_u32(out, uint32_t(key.size()));
  put_u32(out, uint32_t(value.size()));
  out.insert(out.end(), key.begin(), key.end());
  out.insert(out.end(), value.begin(), value.end());
  auto deadline = Clock::now() + timeout_;
  std::string what = "rendezvous: " + std::string(op == kGet ? "waiting for" : "setting") + " key '" + key +
                     "' at the store " + address() + " (timeout " + std::to_string(timeout_.count() / 1000.0) +
                     " s; did every rank start?)";
  char len[4];
  bool ok = io_all(fd_, out.data(), out.size(), true, deadline, what) && io_all(fd_, len, 4, false, deadline, what);
  std::vector<char> reply(ok ? get_u32(len) : 0);
  ok = ok && io_all(fd_, reply.data(), reply.size(), false, deadline, what);
  KILN_CHECK(ok, what, ": the store closed the connection (rank 0 exited?)");
  return reply;
}

void Store::set(const std::string& key, const std::vector<char>& value) { request(kSet, key, value); }

std::vector<char> Store::get(const std::string& key) { return request(kGet, key, {}); }

int64_t Store::add(const std::string& key, int64_t delta) {
  std::vector<char> d(reinterpret_cast<char*>(&delta), reinterpret_cast<char*>(&delta) + sizeof delta);
  std::vector<char> r = request(kAdd, key, d);
  int64_t sum = 0;
  std::memcpy(&sum, r.data(), std::min(r.size(), sizeof sum));
  return sum;
}

}  // namespace kiln::distributed
