#!/usr/bin/env bash
# Builds acrobat with sanitizers (clang, -O1 -g1, -DACROBAT_SANITIZE=...) and runs its tests
# under them; CI (.ci/run) runs it after scripts/test.sh.
#   scripts/sanitize.sh [asan] [tsan]      (default: both, in that order)
#
# asan: build-asan/, AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer (with
#   float-cast-overflow, which -fsanitize=undefined leaves out: a float converted to an integer
#   type that cannot hold it is undefined behaviour too), on the unit, language (error, golden,
#   long sequences), runtime (every engine and scheduler, instance fibers with fork and join, the
#   AOT engine, whose generated C++ is built with the same sanitizers and dlopen'ed) and CLI
#   tests. Left out: the PyTorch oracle's model tests and `bench --all --quick` (labels pytorch
#   and bench: the same code at full model sizes, which would double the stage's time), and one test:
#     lang.CliLimits.OutOfMemoryIsAMessage: it limits the address space (ulimit -v 2 GB) to make
#       an allocation fail; ASan reserves terabytes of shadow address space at start-up and cannot
#       run there, and its operator new ends the process instead of throwing std::bad_alloc. The
#       normal build runs it.
# tsan: build-tsan/, ThreadSanitizer, on the tests that run more than one thread: the thread
#   pool's (tests/runtime/thread_pool_test.cpp); batched kernels split across two threads on the
#   interpreted engine (three models) and the AOT engine (six models and sizes, StackRNN's with
#   fibers), and DRNN, with fibers and forks, on both; JIT GEMM kernels used from four threads;
#   the CLI's runs (--threads defaults to every core); gradients on two threads, whose dW the
#   pool's worker adds while the backward goes on (autodiff/weight_products.h); and the fiber
#   tests (a run's host programs run on fibers of the calling thread, whose switches are told to
#   TSan); and the turns of a server's models on the engine (tests/runtime/engine_turns_test.cpp).
#   Left out, one test:
#     ConcurrentCalls.EachMemberCountsItsOwnCallDepth: it keeps 4096 fibers alive at once (the
#       runtime's limit), and TSan's state for each (a thread's: shadow call stack, event trace)
#       exhausts its internal allocator ("failed to mprotect"). The ASan run runs it.
#
# Any sanitizer report fails the script, also one from a process that a test runs and whose exit
# status it expects to be non-zero: reports go to files (log_path) and the script fails if there
# are any, printing them. The time of each stage is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(asan tsan)

scripts/install-deps.sh

stage() {  # stage NAME COMMAND...: runs COMMAND and prints its wall time
  local name="$1" start=$SECONDS
  shift
  echo "== $name"
  "$@"
  echo "== $name: $((SECONDS - start)) s"
}

build() {  # build DIR SANITIZERS [TARGET...]
  local dir="$1" sanitizers="$2"
  shift 2
  # -O1 -g1 (line tables): instrumented code at -O2 -g compiles 2.3x slower (45 s against 19 s
  # for tests/runtime/aot_test.cpp with ASan + UBSan) and the reports need only lines. clang, as
  # scripts/fuzz.sh: it compiles instrumented code 1.4-1.7x faster than gcc (src/lang/check_ops.cpp
  # 7.3 s against 12.5 s, tools/commands/grad.cpp 16.6 s against 24.7 s with ASan + UBSan), and the
  # AOT engine builds its generated C++ with the same compiler (src/codegen/CMakeLists.txt).
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" -DCMAKE_C_FLAGS_SANITIZE="-O1 -g1" \
    -DACROBAT_SANITIZE="$sanitizers" >/dev/null
  local targets=()
  [ $# -eq 0 ] || targets=(--target "$@")
  cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
}

# Fails if sanitizer reports were written to $1 (a directory of log_path files).
check_reports() {
  shopt -s nullglob
  local reports=("$1"/report.*)
  shopt -u nullglob
  if [ ${#reports[@]} -gt 0 ]; then
    for r in "${reports[@]}"; do
      echo "---- $r" >&2
      cat "$r" >&2
    done
    echo "sanitizer reports: ${#reports[@]} (above, and in $1)" >&2
    return 1
  fi
}

# Runs ctest in build dir $1 with the remaining arguments; reports go to $1/sanitizer-reports.
run_tests() {
  local dir="$1"
  shift
  rm -rf "$dir/sanitizer-reports"
  mkdir -p "$dir/sanitizer-reports"
  local status=0
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" --timeout 1800 "$@") || status=$?
  check_reports "$dir/sanitizer-reports" || status=1
  return $status
}

# A distinctive exit status for a process ended by a sanitizer report, so that a test expecting
# an ordinary failure (status 1) notices it too.
common="halt_on_error=1:exitcode=86:print_suppressions=0"

asan() {
  local dir=build-asan reports="$PWD/build-asan/sanitizer-reports"
  stage "ASan+UBSan build" build "$dir" address,undefined,float-cast-overflow
  # detect_stack_use_after_return stays off: a fiber's last switch back to the scheduler happens
  # inside Boost.Context, after its function has returned (src/runtime/fibers.cpp), so its fake
  # stack cannot be released at the switch itself.
  export ASAN_OPTIONS="$common:log_path=$reports/report:detect_leaks=1:detect_stack_use_after_return=0:check_initialization_order=1:strict_init_order=1"
  export UBSAN_OPTIONS="$common:log_path=$reports/report:print_stacktrace=1"
  export ACROBAT_CACHE_DIR="$PWD/$dir/aot-cache"
  # ASan's redzones give every local its own stack slot: the JSON reader's recursion over 5000
  # levels (the limit the readers promise) needs 2-2.5 MB of the main thread's 8 MB stack in the
  # normal build and 16-32 MB here. (The compiler's passes run on a large stack of their own.)
  ulimit -s 65536
  stage "ASan+UBSan tests" run_tests "$dir" -LE '^(pytorch|bench)$' \
    -E '^lang\.CliLimits\.OutOfMemoryIsAMessage$'
  unset ASAN_OPTIONS UBSAN_OPTIONS ACROBAT_CACHE_DIR
}

tsan() {
  local dir=build-tsan reports="$PWD/build-tsan/sanitizer-reports"
  stage "TSan build" build "$dir" thread runtime_test kernels_test acrobat
  # scripts/tsan.supp: one start-up race inside OpenBLAS, said there.
  export TSAN_OPTIONS="$common:log_path=$reports/report:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
  export ACROBAT_CACHE_DIR="$PWD/$dir/aot-cache"
  local threaded='^(ThreadPool|SharedProducts|TwoThreads|Cli|InstanceFibers|Fibers|ForkJoin|ConcurrentCalls|EngineTurns)\.'
  threaded+='|^BatchedEngine\.TwoThreadsGiveTheOneThreadOutputs$|^Models/AotEqualsInterpreter\.'
  threaded+='|^Gemm\.ThreadsShareWeightsSafely$|^AotEngine\.ParallelBatchesKeepResultsAndErrorOrder$'
  threaded+='|^Gradients\.SameBits|^InputGradients\.TheEncodersGradientsHaveTheSameBitsOnAnyThreads$'
  stage "TSan tests" run_tests "$dir" -R "$threaded" -E '^ConcurrentCalls\.EachMemberCountsItsOwnCallDepth$'
  unset TSAN_OPTIONS ACROBAT_CACHE_DIR
}

for s in "${stages[@]}"; do
  case "$s" in
    asan) asan ;;
    tsan) tsan ;;
    *) echo "usage: scripts/sanitize.sh [asan] [tsan]" >&2; exit 2 ;;
  esac
done
