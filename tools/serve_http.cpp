#include "serve_http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "support/clock.h"

namespace acrobat {
namespace {

thread_local Connection* t_current = nullptr;

// Bytes of a request's line and headers allowed on top of --max-request-bytes: a request is cut
// once it has sent more than both (an endless stream of headers ends there).
constexpr size_t kHeaderAllowance = 64 << 10;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Waits until `fd` has one of `events` (or an error or hang-up) or `deadline` passes; false then.
bool wait_until(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left)));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// How long a refused connection is read before it is closed (GuardedServer::refuse).
constexpr double kRefusalLingerSeconds = 0.05;

// Closes `fd` after its answer: our side first (the client reads the answer, then its end), then
// what the client still sends is read and dropped for at most `linger` seconds, so that unread
// bytes do not make the system reset the connection before the client has read the answer.
void linger_close(int fd, double linger) {
  ::shutdown(fd, SHUT_WR);
  const auto deadline = Clock::now() + seconds(linger);
  char sink[4096];
  while (wait_until(fd, POLLIN, deadline)) {
    const ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
  ::close(fd);
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int r = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                     : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (r != 0 || getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                            NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(serv);
}

}  // namespace

// The library's Stream over one connection, for all its requests (bytes a client sent ahead, the
// next request of a pipeline, stay buffered). Reads wait at most the read timeout for each byte
// and the request's deadline in all; writes the same for the answer. Unlike the library's own
// stream, a half-closed client is writable: it gets its answer.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Connection& c, const HttpLimits& limits) : c_(c), limits_(limits) {}

  // Whether a request begins within `idle` seconds (bytes, or the end of the connection, arrived).
  bool wait_for_request(double idle) const { return at_ < end_ || wait_until(c_.fd_, POLLIN, Clock::now() + seconds(idle)); }
  void begin_request() {
    read_deadline_ = Clock::now() + seconds(limits_.request_timeout);
    writing_ = false;
    request_bytes_ = 0;
    c_.timed_out_ = false;
  }

  bool is_readable() const override {
    return at_ < end_ || wait_until(c_.fd_, POLLIN, std::min(Clock::now() + seconds(limits_.read_timeout), read_deadline_));
  }
  bool is_writable() const override { return wait_until(c_.fd_, POLLOUT, Clock::now() + seconds(limits_.read_timeout)); }

  ssize_t read(char* ptr, size_t size) override {
    if (at_ == end_ && !fill()) return -1;
    if (at_ == end_) return 0;  // the client's end
    const size_t n = std::min(size, end_ - at_);
    std::memcpy(ptr, buffer_ + at_, n);
    at_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!writing_) {
      writing_ = true;
      write_deadline_ = Clock::now() + seconds(limits_.request_timeout);
    }
    for (;;) {
      const ssize_t n = send(c_.fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!wait_until(c_.fd_, POLLOUT, std::min(Clock::now() + seconds(limits_.read_timeout), write_deadline_)))
        return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd_, false, ip, port); }
  socket_t socket() const override { return c_.fd_; }

 private:
  // Reads what has arrived into the empty buffer (end_ == at_ after it: the client's end); false on
  // a timeout, an error or a request over its size.
  bool fill() {
    at_ = end_ = 0;
    for (;;) {
      const ssize_t n = recv(c_.fd_, buffer_, sizeof buffer_, MSG_DONTWAIT);
      if (n >= 0) {
        end_ = static_cast<size_t>(n);
        request_bytes_ += end_;
        return request_bytes_ <= limits_.max_request_bytes + kHeaderAllowance;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!wait_until(c_.fd_, POLLIN, std::min(Clock::now() + seconds(limits_.read_timeout), read_deadline_))) {
        c_.timed_out_ = true;
        return false;
      }
    }
  }

  Connection& c_;
  const HttpLimits& limits_;
  char buffer_[16384];
  size_t at_ = 0, end_ = 0;
  size_t request_bytes_ = 0;
  bool writing_ = false;
  Clock::time_point read_deadline_ = Clock::now(), write_deadline_ = Clock::now();
};

bool Connection::client_gone(const std::string& http_version) {
  if (cut_) return true;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP)) return true;  // reset, or both ends closed
  if (!(p.revents & POLLRDHUP) || probed_ || http_version != "HTTP/1.1") return false;
  // The client sent its end: closed, or only half-closed and waiting for the answer. An interim
  // answer (which an HTTP/1.1 client must accept before the final one) tells them apart: a closed
  // client's system answers it with a reset, seen at the next look.
  probed_ = true;
  static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
  return send(fd_, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN;
}

GuardedServer::GuardedServer(const HttpLimits& limits, Metrics& metrics) : limits_(limits), metrics_(metrics) {
  new_task_queue = [n = threads()] { return new httplib::ThreadPool(n); };
}

Connection* GuardedServer::current() { return t_current; }

bool GuardedServer::process_and_close_socket(socket_t sock) {
  Connection c(sock);
  if (!admit(c)) {
    refuse(sock);
    return false;
  }
  bool ok = true;
  {
    ConnectionStream stream(c, limits_);
    while (stream.wait_for_request(limits_.idle_timeout) && begin_request(c)) {
      stream.begin_request();
      bool closed = false;
      t_current = &c;
      ok = process_request(stream, draining_, closed, nullptr);
      t_current = nullptr;
      if (c.timed_out_) metrics_.count(&Metrics::timed_out_requests);
      if (!end_request(c) || !ok || closed || c.close_after_ || c.timed_out_) break;
    }
  }
  leave(c);
  linger_close(sock, c.close_after_ ? 1.0 : 0.0);
  return ok;
}

bool GuardedServer::admit(Connection& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_ || open_.size() >= limits_.max_connections) return false;
  open_.insert(&c);
  return true;
}

void GuardedServer::refuse(int fd) {
  const std::string body = fmt::format(
      "{{\"error\": \"the server has {} connections open (--max-connections); try again\"}}", limits_.max_connections);
  const std::string answer = fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Retry-After: 1\r\nConnection: close\r\n\r\n{}", body.size(), body);
  [[maybe_unused]] ssize_t n = send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  metrics_.count(&Metrics::refused_connections);
  metrics_.responded(503);
  // Reads what the client sends for a moment before closing: a close with its request unread
  // would reset the connection, and a reset can reach the client before it has read the 503 (its
  // system then drops the answer). A client that says nothing holds the thread no longer.
  linger_close(fd, kRefusalLingerSeconds);
}

bool GuardedServer::begin_request(Connection& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_) return false;
  c.busy_ = true;
  ++busy_;
  return true;
}

bool GuardedServer::end_request(Connection& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  c.busy_ = false;
  --busy_;
  changed_.notify_all();
  return !draining_;
}

void GuardedServer::leave(Connection& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_.erase(&c);
}

size_t GuardedServer::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  for (Connection* c : open_) {
    pollfd p{c->fd_, POLLIN, 0};
    const bool request_waiting = poll(&p, 1, 0) > 0;  // sent before the drain: in flight
    if (!c->busy_ && !request_waiting) ::shutdown(c->fd_, SHUT_RDWR);  // idle: wakes its thread, which closes it
  }
  changed_.wait_until(lock, Clock::now() + seconds(limits_.drain_seconds), [&] { return busy_ == 0; });
  stopped_ = true;
  stop();  // the listening socket: listen_after_bind returns once every connection's thread is done
  size_t cut = 0;
  for (Connection* c : open_) {
    cut += c->busy_ ? 1 : 0;
    c->cut_ = true;
    ::shutdown(c->fd_, SHUT_RDWR);
  }
  metrics_.count(&Metrics::cut_connections, cut);
  return cut;
}

Gauges GuardedServer::connection_gauges() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Gauges g;
  g.open_connections = open_.size();
  g.busy_connections = busy_;
  return g;
}

}  // namespace acrobat
