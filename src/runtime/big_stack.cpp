#include "runtime/big_stack.h"

#include <pthread.h>

#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

namespace acrobat {

namespace {
struct Job {
  const std::function<void()>* fn;
  std::exception_ptr error;
};

void* trampoline(void* arg) {
  auto* job = static_cast<Job*>(arg);
  try {
    (*job->fn)();
  } catch (...) {
    job->error = std::current_exception();
  }
  return nullptr;
}
}  // namespace

void run_with_stack(size_t bytes, const std::function<void()>& fn) {
  Job job{&fn, nullptr};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  int rc = pthread_create(&thread, &attr, trampoline, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error(std::string("cannot start the interpreter thread: ") + std::strerror(rc));
  pthread_join(thread, nullptr);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace acrobat
