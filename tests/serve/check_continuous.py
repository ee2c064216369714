#!/usr/bin/python3
"""`acrobat serve --continuous` end to end: tests/serve/steps.acr (a loop of n steps, a tensor read
each) behind HTTP on a free loopback port, on the engine given (batched or aot).

  check_continuous.py --acrobat BIN --workdir DIR --engine ENGINE

1. 40 requests at once of 1 to 3 instances of 0 to 400 steps, --max-batch 16: every answer equals
   `acrobat run`'s on the same instances (1e-5).
2. A long instance (600000 steps) does not hold the others: sent first, then 8 requests of 50
   steps one after the other, each answered while the long one still runs; it is answered after
   them, equal to `acrobat run`'s.
3. Leaving early: a request of 10^8 steps with "deadline_ms": 300 gets its 504 within 2 s and its
   instance stops (nothing running within 2 s more, instead of the minutes it would run); one of
   10^8 steps whose client closes its connection after 300 ms stops too; /metrics counts both
   stopped instances; a request of 20 steps beside them is answered.
4. A server with --max-steps 5000: a request of [10, 6000, 20] gets the 400 naming the call and
   instance 1 (the error of `acrobat run --max-steps 5000` on it), one of [10] beside it a 200.
5. Streaming ("stream": true): a request of [30, 4] gets server-sent events, each step's emit
   (30, 29, ..., 1 for instance 0 and 4, ..., 1 for instance 1, each instance's in order), then the
   outputs of `acrobat run` in a last event with "status": 200; a request of 10^8 steps gets its
   first event within a second, and once its client closes the connection its instance stops.
6. Admission by cost (--max-cost 400000, the model's cost(n) = n): of two requests of 300000 steps
   the second waits while the first runs (one running, one queued), then both are answered; one of
   500000 (more than the budget) runs alone; a server with --max-cost on a model whose cost takes
   another type does not start, and says why.
7. Several models (--models FILE: steps.acr as "a", and again as "b" with parameters from seed 3,
   its path relative to the file): each answers `acrobat run`'s outputs with its own parameters;
   continuous, a long instance of a does not hold b's requests (each answered while it runs);
   whole-batch, b's request waits queued while a's batch runs (their batches take turns on the
   engine), then both are answered; /metrics counts each model's requests, instances, queued and
   running instances apart (acrobat_model_*{model="a"}). The 404 names both models. Bad files and
   option mixes are refused before serving, naming the file's line: an unknown key, a repeated
   name, a JSON error, a missing "model", a model file that does not exist, a model file beside
   --models, --params with --models.
"""

import argparse
import concurrent.futures
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving import Checks, close, get, metric, metrics, post, stop  # noqa: E402

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.acr")


def start(args, extra):
    server = subprocess.Popen([args.acrobat, "serve", MODEL, "--engine", args.engine, "--threads", "1", "--port", "0",
                               "--continuous"] + extra, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/v1/models/steps:predict", line)
    if not m:
        print("no address in %r" % line, file=sys.stderr)
    return server, (int(m.group(1)) if m else None), line


def expected(args, instances, extra=()):
    """`acrobat run`'s outputs on `instances` (a list of step counts), or its error."""
    path = os.path.join(args.workdir, "in.jsonl")
    out = os.path.join(args.workdir, "out.json")
    with open(path, "w") as f:
        f.write("".join("%d\n" % n for n in instances))
    r = subprocess.run([args.acrobat, "run", MODEL, "--engine", args.engine, "--input", "json:" + path, "--threads", "1",
                        "--output", out] + list(extra), capture_output=True, text=True)
    if r.returncode != 0:
        return r.stderr
    with open(out) as f:
        return [o["data"] for o in json.load(f)["outputs"]]


def body(instances, **fields):
    return json.dumps(dict({"instances": instances}, **fields))


def running(port):
    return metric(metrics(port), "acrobat_running_instances")


def until(cond, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def check_outputs(args, port, check):
    """1. of the module's docstring."""
    rng = random.Random(5)
    requests = [[rng.randrange(0, 401) for _ in range(rng.randrange(1, 4))] for _ in range(40)]
    flat = [n for r in requests for n in r]
    want = expected(args, flat)
    if not check(isinstance(want, list), "acrobat run: %s" % want):
        return
    gate = threading.Barrier(len(requests))

    def one(r):
        gate.wait()
        return post(port, body(r), name="steps")

    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(one, requests))
    k = 0
    for r, (status, b) in zip(requests, answers):
        ok = status == 200 and all(close(p["data"], want[k + j]) for j, p in enumerate(b.get("predictions", [])))
        check(ok and len(b["predictions"]) == len(r), "request %s: %s %s" % (r, status, str(b)[:200]))
        k += len(r)


def check_long_does_not_hold(args, port, check):
    """2. of the module's docstring."""
    want = expected(args, [600000, 50])
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        long = pool.submit(post, port, body([600000]), "steps")
        check(until(lambda: running(port) == 1, 5), "the long instance runs")
        for i in range(8):
            status, b = post(port, body([50]), name="steps")
            check(status == 200 and close(b["predictions"][0]["data"], want[1]), "short request %d: %s" % (i, status))
            check(not long.done(), "short request %d answered while the long one runs" % i)
        status, b = long.result()
        check(status == 200 and close(b["predictions"][0]["data"], want[0]), "the long one: %s" % status)


def check_leaving(args, port, check):
    """3. of the module's docstring."""
    before = metric(metrics(port), "acrobat_dropped_instances_total") or 0
    t0 = time.monotonic()
    status, b = post(port, body([100000000], deadline_ms=300), name="steps")
    took = time.monotonic() - t0
    check(status == 504 and took < 2, "deadline: %s after %.2f s: %s" % (status, took, b))
    check(until(lambda: running(port) == 0, 2), "the late instance stopped")
    # A client that goes away: the request sent on a socket closed 300 ms later.
    data = body([100000000]).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/models/steps:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    check(until(lambda: running(port) == 1, 2), "the instance of the client that goes runs")
    time.sleep(0.3)
    s.close()
    check(until(lambda: running(port) == 0, 2), "the instance of the client gone stopped")
    status, b = post(port, body([20]), name="steps")
    check(status == 200, "a request after them: %s" % status)
    text = metrics(port)
    check((metric(text, "acrobat_dropped_instances_total") or 0) - before == 2, "2 stopped instances in /metrics")


def events(resp):
    """The server-sent events of a streamed answer, parsed, as they arrive."""
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if line.startswith("data: "):
            yield json.loads(line[len("data: "):])


def check_streaming(args, port, check):
    """5. of the module's docstring."""
    import http.client
    want = expected(args, [30, 4])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/models/steps:predict", body([30, 4], stream=True), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    check(resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream",
          "a streamed answer: %s %s" % (resp.status, resp.getheader("Content-Type")))
    got = list(events(resp))
    conn.close()
    emits = {0: [], 1: []}
    for e in got[:-1]:
        emits[e["instance"]].append(e["emit"])
    check(emits == {0: list(range(30, 0, -1)), 1: [4, 3, 2, 1]}, "the emits in order: %s" % emits)
    last = got[-1] if got else {}
    check(last.get("status") == 200 and len(last.get("predictions", [])) == 2 and
          all(close(p["data"], w) for p, w in zip(last["predictions"], want)), "the last event: %s" % str(last)[:200])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t0 = time.monotonic()
    conn.request("POST", "/v1/models/steps:predict", body([100000000], stream=True), {"Content-Type": "application/json"})
    first = next(events(conn.getresponse()), None)
    took = time.monotonic() - t0
    check(first == {"instance": 0, "emit": 100000000} and took < 1, "the first event %s after %.3f s" % (first, took))
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    check(until(lambda: running(port) == 0, 3), "the streamed instance stopped once its client left")


def check_cost(args, check):
    """6. of the module's docstring."""
    server, port, _ = start(args, ["--max-cost", "400000"])
    try:
        if not check(port is not None, "a server with --max-cost starts"):
            return
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, port, body([300000]), "steps")
            check(until(lambda: running(port) == 1, 5), "the first runs")
            second = pool.submit(post, port, body([300000]), "steps")
            check(until(lambda: metric(metrics(port), "acrobat_queued_instances") == 1, 2), "the second is queued")
            text = metrics(port)
            check(not first.done() and metric(text, "acrobat_running_instances") == 1,
                  "while the first runs, the second waits: %s %s" % (first.done(), metric(text, "acrobat_running_instances")))
            check(first.result()[0] == 200 and second.result()[0] == 200, "both answered")
        check(post(port, body([500000]), name="steps")[0] == 200, "an instance over the budget runs alone")
        status, text, _ = get(port, "/v1/models/steps/metadata")
        check(json.loads(text).get("batching", {}).get("max_cost") == 400000, "max_cost in the metadata: %s" % text)
    finally:
        stop(server)
    bad = os.path.join(args.workdir, "badcost.acr")
    with open(MODEL) as f:
        source = f.read()
    with open(bad, "w") as f:
        f.write(source.replace("def cost(n: int) -> int { n }", "def cost(n: int) -> float { 1.0 }"))
    r = subprocess.run([args.acrobat, "serve", bad, "--port", "0", "--continuous", "--max-cost", "10"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "cost(x: int) -> int" in r.stderr, "a cost of the wrong type: %s %r" % (r.returncode, r.stderr))


def start_models(args, models, extra):
    """A server of the models file `models`: (process, port, its first lines, one a model)."""
    server = subprocess.Popen([args.acrobat, "serve", "--models", models, "--engine", args.engine, "--threads", "1",
                               "--port", "0"] + extra, stdout=subprocess.PIPE, text=True)
    lines = [server.stdout.readline(), server.stdout.readline()]
    m = re.search(r"http://127\.0\.0\.1:(\d+)/v1/models/a:predict", lines[0])
    if not m:
        print("no address in %r" % lines, file=sys.stderr)
    return server, (int(m.group(1)) if m else None), lines


def check_models(args, check):
    """7. of the module's docstring."""
    models = os.path.join(args.workdir, "models.jsonl")
    with open(models, "w") as f:
        f.write(json.dumps({"model": MODEL, "name": "a"}) + "\n")
        f.write(json.dumps({"model": os.path.relpath(MODEL, args.workdir), "name": "b", "seed": 3}) + "\n")
    want_a, want_b = expected(args, [600000, 50]), expected(args, [50, 7], ["--seed", "3"])
    if not check(isinstance(want_a, list) and isinstance(want_b, list), "acrobat run: %s %s" % (want_a, want_b)):
        return
    check(not close(want_a[1], want_b[0]), "the two models' parameters differ")
    for continuous in (True, False):
        server, port, lines = start_models(args, models, ["--continuous"] if continuous else [])
        kind = "continuous" if continuous else "whole-batch"
        try:
            if not check(port is not None and "/v1/models/b:predict" in lines[1], "%s: both served: %r" % (kind, lines)):
                continue
            status, b = post(port, body([50, 7]), name="b")
            check(status == 200 and all(close(p["data"], w) for p, w in zip(b["predictions"], want_b)),
                  "%s: b answers with its own parameters: %s %s" % (kind, status, str(b)[:200]))
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                long = pool.submit(post, port, body([600000]), "a")
                check(until(lambda: running(port) == 1, 5), "%s: a's long instance runs" % kind)
                if continuous:
                    for i in range(4):
                        status, b = post(port, body([50]), name="b")
                        check(status == 200 and close(b["predictions"][0]["data"], want_b[0]),
                              "%s: b's request %d: %s" % (kind, i, status))
                        check(not long.done(), "%s: b's request %d answered while a's long one runs" % (kind, i))
                else:
                    short = pool.submit(post, port, body([50]), "b")
                    check(until(lambda: metric(metrics(port), "acrobat_queued_instances") == 1, 2),
                          "%s: b's request waits for the engine" % kind)
                    text = metrics(port)
                    check(metric(text, 'acrobat_model_queued_instances{model="b"}') == 1 and
                          metric(text, 'acrobat_model_running_instances{model="a"}') == 1 and
                          metric(text, 'acrobat_model_queued_instances{model="a"}') == 0,
                          "%s: /metrics says which model's instance waits and which runs" % kind)
                    time.sleep(0.2)
                    check(not short.done() and not long.done() and
                          metric(metrics(port), "acrobat_queued_instances") == 1,
                          "%s: b's request still waits while a's batch runs" % kind)
                    status, b = short.result()
                    check(status == 200 and close(b["predictions"][0]["data"], want_b[0]),
                          "%s: b's request after a's batch: %s" % (kind, status))
                status, b = long.result()
                check(status == 200 and close(b["predictions"][0]["data"], want_a[0]), "%s: a's long one: %s" % (kind, status))
            status, text, _ = get(port, "/nothing")
            check(status == 404 and "the models a, b at POST /v1/models/NAME:predict" in text, "the 404: %s" % text)
            status, text, _ = get(port, "/v1/models/b/metadata")
            check(status == 200 and json.loads(text).get("name") == "b", "b's metadata: %s" % text[:200])
            text = metrics(port)
            b_requests = 5 if continuous else 2
            counts = [metric(text, 'acrobat_model_requests_total{model="a",code="200"}'),
                      metric(text, 'acrobat_model_requests_total{model="b",code="200"}'),
                      metric(text, 'acrobat_model_instances_total{model="a"}'),
                      metric(text, 'acrobat_model_instances_total{model="b"}'),
                      metric(text, 'acrobat_requests_total{code="200"}')]
            check(counts == [1, b_requests, 1, b_requests + 1, b_requests + 1],
                  "%s: /metrics counts each model's requests and instances apart, and both together: %s" %
                  (kind, counts))
        finally:
            stop(server)

    def refused(lines, extra, want, model=None):
        bad = os.path.join(args.workdir, "bad-models.jsonl")
        with open(bad, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        cmd = [args.acrobat, "serve"] + ([model] if model else []) + ["--models", bad, "--port", "0"] + extra
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and all(w in r.stderr for w in want),
              "refused %s %s: %s %r (expected %s)" % (lines, extra, r.returncode, r.stderr, want))

    good = json.dumps({"model": MODEL, "name": "a"})
    refused([good, '{"model": "x.acr", "size": 3}'], [], ["bad-models.jsonl:2:1", 'unknown key "size"'])
    refused([good, good], [], ["bad-models.jsonl:2:1", "a second model named a"])
    refused([good, "", '{"model": "x.acr",}'], [], ["bad-models.jsonl:3:"])
    refused(['{"name": "c"}'], [], ["bad-models.jsonl:1:1", '"model"'])
    refused(['{"model": "no-such.acr"}'], [], ["no-such.acr"])
    refused(['{"model": "x.acr", "name": "a/b"}'], [], ["bad-models.jsonl:1:1", "no model name"])
    refused([good], [], ["give one of them"], model=MODEL)
    refused([good], ["--params", "w.safetensors"], ["--params with --models"])


def check_budget(args, check):
    """4. of the module's docstring."""
    server, port, _ = start(args, ["--max-steps", "5000"])
    try:
        if not check(port is not None, "a server with --max-steps 5000 starts"):
            return
        error = expected(args, [10, 6000, 20], ["--max-steps", "5000"])
        want = re.search(r"error: (instance 1: .*)", error)
        check(want is not None, "acrobat run --max-steps 5000 fails instance 1: %r" % error)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            bad = pool.submit(post, port, body([10, 6000, 20]), "steps")
            good = pool.submit(post, port, body([10]), "steps")
            status, b = bad.result()
            check(status == 400 and want is not None and want.group(1) in b.get("error", ""),
                  "over the budget: %s %s" % (status, b))
            check(good.result()[0] == 200, "beside it: %s" % (good.result(),))
    finally:
        stop(server)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acrobat", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--engine", default="batched")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    check = Checks("check_continuous.py")
    server, port, line = start(args, ["--max-batch", "16"])
    try:
        if not check(port is not None and "continuous batching of up to 16" in line, "the server starts: %r" % line):
            return 1
        check_outputs(args, port, check)
        check_long_does_not_hold(args, port, check)
        check_leaving(args, port, check)
        check_streaming(args, port, check)
    finally:
        stop(server)
    check_budget(args, check)
    check_cost(args, check)
    check_models(args, check)
    if check.problems:
        return 1
    print("check_continuous.py: ok (%s)" % args.engine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
