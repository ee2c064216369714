#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, ASan and UBSan into build-fuzz/ and runs each
# on a seed corpus taken from the repository (models, error cases, SST trees, bad input files).
#   scripts/fuzz.sh [SECONDS] [RUNS] [TARGET...]
# runs each target for SECONDS (default 20), or for RUNS executions when RUNS is given (then
# SECONDS is only an upper bound). Targets: model ptb safetensors json_lines tokens request (default
# all).
# Any crash, leak, hang (10 s per input) or sanitizer report fails the script; the input that
# caused it is left in build-fuzz/artifacts/. The corpus grows in build-fuzz/corpus/ across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
runs="${2:-}"
shift $(( $# < 2 ? $# : 2 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(model ptb safetensors json_lines tokens request)

scripts/install-deps.sh
dir=build-fuzz
# -O1 -g1 (line tables), as scripts/sanitize.sh builds: instrumented code compiles about half as
# fast at -O2 -g, and a short run finds what it finds by coverage, not by executions per second.
CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Fuzz \
  -DCMAKE_CXX_FLAGS_FUZZ="-O1 -g1" -DCMAKE_C_FLAGS_FUZZ="-O1 -g1" -DACROBAT_FUZZ=ON -DACROBAT_TESTS=OFF >/dev/null
cmake --build "$dir" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

# Seed corpora from the repository's own files, rebuilt on every run.
seeds="$dir/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{model,ptb,safetensors,json_lines,tokens,request} "$dir/corpus" "$dir/artifacts"
cp models/*.acr tests/errors/*.acr tests/golden/*.acr src/lang/prelude.acr "$seeds/model/"
head -n 200 data/sst/test.txt | split -l 10 - "$seeds/ptb/sst-"
cp tests/io/bad/ptb_*.txt "$seeds/ptb/"
cp tests/io/bad/jsonl_*.txt tests/io/bad/tokens_*.txt "$seeds/json_lines/"
cp tests/io/bad/tokens_*.txt "$seeds/tokens/"
head -n 50 data/sst/test.txt | tr -c '0-9 \n' ' ' > "$seeds/tokens/digits.txt"
python3 - "$seeds" <<'PY'
# JSON lines of each type the json_lines target reads, and small safetensors files of each dtype.
import json, struct, sys
seeds = sys.argv[1]
lines = ['7', '-2.5', '"NaN"', '[[1, 2, 3], [4, 5, "Infinity"]]',
         '{"shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}', '[1, 2, 3]',
         '{"Node": [{"Leaf": [1]}, {"Leaf": [2]}]}', '{"Group": [[{"Circle": [1.5]}, {"Rect": [1, 2]}]]}',
         '[true, [0.5], [[1, "Circle"]], []]']
open(f"{seeds}/json_lines/types.jsonl", "w").write("\n".join(lines) + "\n")
def st(tensors, meta=None):
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta: header["__metadata__"] = meta
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data
files = {
    "f32": st([("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))], {"format": "pt"}),
    "mixed": st([("a", "F16", [2], struct.pack("<2e", 1.5, -2)), ("b", "BF16", [1], b"\x80\x3f"),
                 ("c", "F64", [], struct.pack("<d", 3.25)), ("d", "F32", [0, 3], b"")]),
    "empty": st([]),
}
for name, data in files.items():
    open(f"{seeds}/safetensors/{name}.safetensors", "wb").write(data)
# Predict request bodies: one per entry type of the request target, and the errors a server meets.
requests = {
    "trees": '{"instances": [{"Node": [{"Leaf": [3]}, {"Leaf": [7]}]}, {"Leaf": [1]}]}',
    "words": '{"instances": [[1, 2, 3], []]}',
    "tensor": '{"instances": [[[1, 2, 3], [4, 5, 6]], {"shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}]}',
    "shape": '{"instances": [{"Group": [[{"Circle": [1.5]}, {"Rect": [1, 2]}]]}]}',
    "empty": '{"instances": []}', "other": '{"inputs": [1]}', "twice": '{"instances": [1], "instances": [2]}',
    "deep": '{"instances": [' + '{"Node": [' * 40 + '{"Leaf": [1]}' + ', {"Leaf": [2]}]}' * 40 + ']}',
}
for name, text in requests.items():
    open(f"{seeds}/request/{name}.json", "w").write(text)
PY

for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t"
  limit=(-max_total_time="$seconds")
  [ -z "$runs" ] || limit+=(-runs="$runs")
  echo "== fuzz_$t: ${runs:+$runs runs, at most }$seconds s"
  log="$dir/fuzz_$t.log"
  if ! "$dir/fuzz/fuzz_$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" "$dir/corpus/$t" "$seeds/$t" \
      >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz_$t failed; the input is in $dir/artifacts/, the whole log in $log" >&2
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log"
done
