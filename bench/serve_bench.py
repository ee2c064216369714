#!/usr/bin/python3
"""Load test of `acrobat serve`: the Tree-LSTM on the SST test trees, one request per tree, from 1,
8 and 64 concurrent clients (build/bench/serve_load, C++, keep-alive connections), against the same
server serving one request at a time (--max-batch 1) and against `acrobat run --batch 64` on the
same trees (no HTTP: the ceiling). Loopback only, every run bounded by the 2210 trees.

  /usr/bin/python3 bench/serve_bench.py [--hidden 256] [--engine batched] [--threads 1]
      [--servers 64:0,32:0,64:5] [--out bench/results/serve]

--servers lists the batching servers to run, each MAX_BATCH:MAX_DELAY_MS; the one-at-a-time server
(--max-batch 1) always runs too. Writes serve.json and serve.md to --out. The server and the client
share this machine: when it has more cores than --threads, the engine gets the first --threads cores
to itself (`acrobat serve` pins them) and the HTTP threads and the client run on the rest."""

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


def cpu_model():
    """The CPU's model name, as lscpu says it."""
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return re.search(r"Model name:\s*(.*)", cpu).group(1).strip()


def stop_servers(servers):
    """SIGTERM to each server, then its end (a drain: at most two minutes)."""
    for server in servers:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=120)


def client_cores(threads):
    """The cores the client runs on: those the server leaves to HTTP (all but the first `threads`), or
    every core when there are no more cores than that."""
    cores = sorted(os.sched_getaffinity(0))
    return cores[threads:] if len(cores) > threads else cores


def load(args, port, instances, clients):
    cores = client_cores(args.threads)
    out = subprocess.run([args.load, "--port", str(port), "--model", "treelstm", "--instances", instances,
                          "--clients", str(clients)], capture_output=True, text=True,
                         preexec_fn=lambda: os.sched_setaffinity(0, cores))
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
    ap.add_argument("--servers", default="64:0,32:0,64:5",
                    help="batching servers, MAX_BATCH:MAX_DELAY_MS,... (one at a time always runs too)")
    ap.add_argument("--repeat", type=int, default=3, help="servers per cell; the median run is reported")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "serve"))
    args = ap.parse_args()
    servers = []
    for item in args.servers.split(","):
        m = re.fullmatch(r"(\d+):(\d+)", item.strip())
        if not m or int(m.group(1)) < 1:
            ap.error("--servers: expected MAX_BATCH:MAX_DELAY_MS (for example 64:0), not %r" % item)
        servers.append(("batched (max %s, %s ms)" % (m.group(1), m.group(2)), int(m.group(1)), m.group(2)))
    servers.append(("one at a time (max 1)", 1, "0"))
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(ROOT, "build", "serve-bench")  # weights and trees (not results)
    _, _, _, _, params = registry.setup_run("treelstm", {"H": args.hidden}, TEST, VOCAB, 1, work)
    trees = acrobat.load(MODEL, dims={"H": args.hidden}).read_values("sst:" + TEST)
    instances = os.path.join(work, "trees.jsonl")
    with open(instances, "w") as f:
        for t in trees:
            f.write(json.dumps(t) + "\n")

    # The ceiling: `acrobat run --batch 64` on the same trees, the median of --repeat runs.
    # Beside it `acrobat run --batch 1`: batching's whole gain on this model, the most any server
    # can gain over serving one request at a time.
    def offline_run(batch):
        runs = []
        for _ in range(args.repeat):
            run = subprocess.run([args.acrobat, "run", MODEL, "--set", "H=%d" % args.hidden, "--params", params,
                                  "--input", "sst:" + TEST, "--batch", str(batch), "--threads", str(args.threads),
                                  "--engine", args.engine, "--show", "0"], capture_output=True, text=True, check=True)
            runs.append(float(re.search(r"([\d.]+) instances/s", run.stdout).group(1)))
        return sorted(runs)[len(runs) // 2]
    offline = offline_run(64)
    offline_1 = offline_run(1)
    rows = []
    for label, max_batch, delay_ms in servers:
        for clients in (1, 8, 64):
            runs = []
            for _ in range(args.repeat):
                server, port = serve(args, params, max_batch, delay_ms)
                try:
                    runs.append(load(args, port, instances, clients))
                finally:
                    server.send_signal(signal.SIGTERM)
                    server.communicate(timeout=60)
            runs.sort(key=lambda run: run["requests_per_second"])
            r = runs[len(runs) // 2]  # the median run
            r["requests_per_second_runs"] = [run["requests_per_second"] for run in runs]
            r["server"] = label
            rows.append(r)
            print("%-26s clients %3d: %8.1f requests/s, p50 %7.2f ms, p99 %7.2f ms" % (
                label, clients, r["requests_per_second"], r["p50_ms"], r["p99_ms"]), flush=True)
    one_at_a_time_64 = next(r for r in rows if r["clients"] == 64 and "one at a time" in r["server"])
    model_name = cpu_model()
    result = {"hidden": args.hidden, "engine": args.engine, "threads": args.threads, "trees": len(trees),
              "servers": args.servers,
              "offline_instances_per_second": offline, "offline_batch1_instances_per_second": offline_1,
              "cpu": model_name, "rows": rows}
    with open(os.path.join(args.out, "serve.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = ["# acrobat serve under load", "",
          "`/usr/bin/python3 bench/serve_bench.py --hidden %d --engine %s --threads %d --servers %s --repeat %d`: "
          "the Tree-LSTM H=%d on the %d "
          "SST test trees, one request per tree (each client sends its next request when answered; a "
          "warm-up pass, then the timed one; the median of %d servers per row); %s; the engine on %d thread(s) "
          "and core(s) of its own, the HTTP threads and the client on the rest. "
          "`acrobat run --batch 64` on the same trees (median of %d): %.1f trees/s; `acrobat run --batch 1`: "
          "%.1f trees/s, so batching gains at most %.2fx on this model and machine." % (
              args.hidden, args.engine, args.threads, args.servers, args.repeat, args.hidden, len(trees),
              args.repeat, model_name, args.threads, args.repeat, offline, offline_1, offline / offline_1), "",
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
