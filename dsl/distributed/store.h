// The rendezvous store: a small key-value service over TCP that the processes of one job use to
// find each other, as torchrun's TCPStore does. Rank 0 serves it at MASTER_ADDR:MASTER_PORT;
// every rank (rank 0 too) is a client. Gloo exchanges its addresses through it, NCCL its unique
// id, and the process group its checks (tensor sizes across ranks).
//
// Every wait is bounded: get() of a key no rank sets, or a server that never comes up, is a
// kiln::Error after `timeout` naming the key and the address.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::distributed {

class Store {
 public:
  // Connects to the store at host:port, serving it first when `serve` (rank 0). Retries the
  // connection until `timeout` while the server is not up yet.
  Store(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // The key's value, waiting until some rank sets it.
  std::vector<char> get(const std::string& key);
  // Adds delta to the key's integer value (0 when unset) and returns the sum.
  int64_t add(const std::string& key, int64_t delta);
  std::chrono::milliseconds timeout() const { return timeout_; }
  std::string address() const;

 private:
  struct Server;
  std::vector<char> request(char op, const std::string& key, const std::vector<char>& value);

  std::string host_;
  int port_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Server> server_;
  int fd_ = -1;
};

}  // namespace kiln::distributed
