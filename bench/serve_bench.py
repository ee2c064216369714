#!/usr/bin/python3
"""Load test of `acrobat serve`: the Tree-LSTM on the SST test trees, one request per tree, from 1,
8 and 64 concurrent clients (build/bench/serve_load, C++, keep-alive connections), against the same
server serving one request at a time (--max-batch 1) and against `acrobat run --batch 64` on the
same trees (no HTTP: the ceiling). Loopback only, every run bounded by the 2210 trees.

  /usr/bin/python3 bench/serve_bench.py [--hidden 256] [--engine batched] [--threads 1] [--out bench/results/serve]

Writes serve.json and serve.md to --out. The server and the client share this machine's cores."""

import argparse
import json
import os
import re
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import acrobat  # noqa: E402
import registry  # noqa: E402

TEST = os.path.join(ROOT, "data", "sst", "test.txt")
VOCAB = os.path.join(ROOT, "data", "sst", "vocab.txt")
MODEL = os.path.join(ROOT, "models", "treelstm.acr")


def serve(args, params, max_batch, delay_ms):
    cmd = [args.acrobat, "serve", MODEL, "--set", "H=%d" % args.hidden, "--params", params, "--port", "0",
           "--max-batch", str(max_batch), "--max-delay-ms", str(delay_ms), "--engine", args.engine,
           "--threads", str(args.threads)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    m = re.search(r":(\d+)/v1/models/", p.stdout.readline())
    if not m:
        p.kill()
        raise SystemExit("serve_bench.py: the server did not start")
    return p, int(m.group(1))


def load(args, port, instances, clients):
    out = subprocess.run([args.load, "--port", str(port), "--model", "treelstm", "--instances", instances,
                          "--clients", str(clients)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("serve_bench.py: serve_load failed: " + out.stdout + out.stderr)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", default=os.path.join(ROOT, "build", "tools", "acrobat"))
    ap.add_argument("--load", default=os.path.join(ROOT, "build", "bench", "serve_load"))
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--engine", default="batched", choices=["batched", "aot"])
    ap.add_argument("--threads", type=int, default=1, help="the engine's threads (the client has the rest)")
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--delay-ms", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "serve"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(ROOT, "build", "serve-bench")  # weights and trees (not results)
    _, _, _, _, params = registry.setup_run("treelstm", {"H": args.hidden}, TEST, VOCAB, 1, work)
    trees = acrobat.load(MODEL, dims={"H": args.hidden}).read_values("sst:" + TEST)
    instances = os.path.join(work, "trees.jsonl")
    with open(instances, "w") as f:
        for t in trees:
            f.write(json.dumps(t) + "\n")

    # The ceiling: `acrobat run --batch 64` on the same trees, the best of 3 runs.
    offline = 0.0
    for _ in range(3):
        run = subprocess.run([args.acrobat, "run", MODEL, "--set", "H=%d" % args.hidden, "--params", params,
                              "--input", "sst:" + TEST, "--batch", "64", "--threads", str(args.threads),
                              "--engine", args.engine, "--show", "0"], capture_output=True, text=True, check=True)
        offline = max(offline, float(re.search(r"([\d.]+) instances/s", run.stdout).group(1)))
    rows = []
    for label, max_batch in (("batched (max %d, %g ms)" % (args.max_batch, args.delay_ms), args.max_batch),
                             ("one at a time (max 1)", 1)):
        for clients in (1, 8, 64):
            server, port = serve(args, params, max_batch, args.delay_ms)
            try:
                r = load(args, port, instances, clients)
            finally:
                server.send_signal(signal.SIGTERM)
                server.communicate(timeout=60)
            r["server"] = label
            rows.append(r)
            print("%-26s clients %3d: %8.1f requests/s, p50 %7.2f ms, p99 %7.2f ms" % (
                label, clients, r["requests_per_second"], r["p50_ms"], r["p99_ms"]), flush=True)
    one_at_a_time_64 = next(r for r in rows if r["clients"] == 64 and "one at a time" in r["server"])
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = re.search(r"Model name:\s*(.*)", cpu).group(1).strip()
    result = {"hidden": args.hidden, "engine": args.engine, "threads": args.threads, "trees": len(trees),
              "offline_instances_per_second": offline, "cpu": model_name, "rows": rows}
    with open(os.path.join(args.out, "serve.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = ["# acrobat serve under load", "",
          "`/usr/bin/python3 bench/serve_bench.py --hidden %d --engine %s --threads %d --max-batch %d --delay-ms %g`: "
          "the Tree-LSTM H=%d on the %d "
          "SST test trees, one request per tree (each client sends its next request when answered; a "
          "warm-up pass, then the timed one); %s; the engine on %d thread(s), the client on the rest. "
          "`acrobat run --batch 64` on the same trees (best of 3): %.1f trees/s." % (
              args.hidden, args.engine, args.threads, args.max_batch, args.delay_ms, args.hidden, len(trees),
              model_name, args.threads, offline), "",
          "| server | clients | requests/s | vs run --batch 64 | vs one at a time, 64 clients | p50 ms | p99 ms |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append("| %s | %d | %.1f | %.2fx | %.2fx | %.2f | %.2f |" % (
            r["server"], r["clients"], r["requests_per_second"], r["requests_per_second"] / offline,
            r["requests_per_second"] / one_at_a_time_64["requests_per_second"], r["p50_ms"], r["p99_ms"]))
    with open(os.path.join(args.out, "serve.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
