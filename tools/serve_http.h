// The connections of `acrobat serve`: a cpp-httplib server whose connections are bounded in number
// and in time, so that slow or idle clients cannot take its threads, and that drains on request.
//
// The library serves a connection on one thread from accept to close. This server keeps at most
// `max_connections` of them open (a client beyond gets an immediate 503 and is closed), reads every
// byte with a timeout between bytes (`read_timeout`), closes a keep-alive connection idle for
// `idle_timeout`, and gives each request `request_timeout` from its first byte to arrive whole, and
// its answer as long to be taken (a drip of one byte a second is cut, however patient the read
// timeout). A client that half-closes its side after its request (shutdown(SHUT_WR)) still gets
// its answer. drain() stops it: idle connections are closed at once, requests in flight (and any
// that arrive meanwhile) answered with Connection: close, and once none is left, or after
// `drain_seconds`, the listening socket is closed and whatever is still in a request is cut.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>

#include <httplib.h>

#include "serve_metrics.h"

namespace acrobat {

struct HttpLimits {
  size_t max_connections = 256;
  double read_timeout = 10;     // seconds between two bytes of a request (or of taking its answer)
  double idle_timeout = 5;      // seconds a keep-alive connection waits for its next request
  double request_timeout = 30;  // seconds for a request to arrive whole (and for its answer to leave)
  double drain_seconds = 10;    // on drain(), seconds given to the requests in flight
  size_t max_request_bytes = 16 << 20;
};

// One client connection, as the handlers of its requests see it (GuardedServer::current()).
class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  // Whether the client is gone: the connection was cut, or reset, or closed its side and then
  // refused a byte. A client that only half-closed (shutdown(SHUT_WR)) is not gone. May write an
  // interim "100 Continue" to an HTTP/1.1 client to tell a closed one from a half-closed one (any
  // other client that sent its end is taken to be waiting).
  bool client_gone(const std::string& http_version);
  // The connection closes after the current answer (its request's body was not read whole).
  void close_after_answer() { close_after_ = true; }
  bool timed_out() const { return timed_out_; }  // the current request missed its deadline

 private:
  friend class GuardedServer;
  friend class ConnectionStream;
  int fd_;
  bool busy_ = false;  // in a request (guarded by GuardedServer's mutex)
  bool close_after_ = false, timed_out_ = false, probed_ = false;
  std::atomic<bool> cut_{false};
};

class GuardedServer : public httplib::Server {
 public:
  GuardedServer(const HttpLimits& limits, Metrics& metrics);
  // The library's thread pool, one thread per connection allowed plus a few that refuse the rest.
  size_t threads() const { return limits_.max_connections + 4; }

  // The connection whose request this thread serves (nullptr outside a handler).
  static Connection* current();

  // Stops serving: idle connections closed now, requests in flight given drain_seconds, then the
  // rest cut and the listening socket closed, so that listen_after_bind() returns. Blocks until
  // then; returns the number of connections cut.
  size_t drain();
  bool draining() const { return draining_; }

  Gauges connection_gauges() const;

 private:
  // The library's hook for one accepted connection (a private virtual of httplib::Server, whose own
  // version counts nothing, has no deadline and does not answer a half-closed client): admits it or
  // refuses it, then serves its requests over a ConnectionStream with process_request().
  bool process_and_close_socket(socket_t sock) override;
  bool admit(Connection& c);
  void refuse(int fd);
  bool begin_request(Connection& c);
  bool end_request(Connection& c);
  void leave(Connection& c);

  const HttpLimits limits_;
  Metrics& metrics_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::set<Connection*> open_;
  size_t busy_ = 0;
  std::atomic<bool> draining_{false};
  bool stopped_ = false;  // the drain is over: no request begins
};

}  // namespace acrobat
