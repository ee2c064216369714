#include "support/big_stack.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace acrobat {

StackThread::StackThread(size_t stack_bytes) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  int rc = pthread_create(&thread_, &attr, &StackThread::main_loop, this);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    throw std::runtime_error(std::string("cannot start the interpreter thread: ") + std::strerror(rc));
}

StackThread::~StackThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  pthread_join(thread_, nullptr);
}

void StackThread::start(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  job_ = std::move(fn);
  job_done_ = false;
  error_ = nullptr;
  cv_.notify_all();
}

void StackThread::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return job_done_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void* StackThread::main_loop(void* arg) {
  auto* self = static_cast<StackThread*>(arg);
  std::unique_lock<std::mutex> lock(self->mutex_);
  for (;;) {
    self->cv_.wait(lock, [self] { return self->stop_ || !self->job_done_; });
    if (self->stop_) return nullptr;
    std::function<void()> job = std::move(self->job_);
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    job = nullptr;
    lock.lock();
    self->error_ = error;
    self->job_done_ = true;
    self->cv_.notify_all();
  }
}

}  // namespace acrobat
