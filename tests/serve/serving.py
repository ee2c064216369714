"""What the tests of `acrobat serve` share: the TreeLSTM (H 64) with its weights and the outputs
`acrobat run` gives on the first SST test trees (the right answers), a server of it on a free
loopback port, HTTP requests (by urllib, or raw bytes on a socket), /metrics and the server's RSS.
Needs the Python package of the same build (PYTHONPATH=build/python) to encode the trees."""

import concurrent.futures
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

import acrobat  # noqa: E402
import registry  # noqa: E402

TEST = os.path.join(ROOT, "data", "sst", "test.txt")
VOCAB = os.path.join(ROOT, "data", "sst", "vocab.txt")
MODEL = os.path.join(ROOT, "models", "treelstm.acr")
# Flags every server of the tests gets besides its own (ACROBAT_SERVE_FLAGS, e.g. "--continuous").
SERVE_FLAGS = os.environ.get("ACROBAT_SERVE_FLAGS", "").split()
CONTINUOUS = "--continuous" in SERVE_FLAGS  # instances join the running batch: no batch fails whole


class Model:
    """The weights (`params`), the first `count` test trees as JSON instances (`trees`) and their
    outputs by `acrobat run` (`expected`)."""

    def __init__(self, acrobat_bin, workdir, count=126):
        os.makedirs(workdir, exist_ok=True)
        _, _, _, _, self.params = registry.setup_run("treelstm", {"H": 64}, TEST, VOCAB, 1, workdir)
        self.trees = acrobat.load(MODEL, dims={"H": 64}, threads=1).read_values("sst:" + TEST, limit=count)
        out = os.path.join(workdir, "expected.json")
        subprocess.run([acrobat_bin, "run", MODEL, "--set", "H=64", "--params", self.params, "--input", "sst:" + TEST,
                        "--limit", str(count), "--threads", "1", "--output", out], check=True, capture_output=True)
        with open(out) as f:
            self.expected = [o["data"] for o in json.load(f)["outputs"]]


class Checks:
    """Collects failed checks, printing each as it fails."""

    def __init__(self, name):
        self.name, self.problems = name, []

    def __call__(self, cond, what):
        if not cond:
            self.problems.append(what)
            print("%s: FAILED: %s" % (self.name, what), file=sys.stderr, flush=True)
        return cond


def start(acrobat_bin, params, extra, env=None, port_given=False):
    """A server of the model on a free port (or the one `extra` gives): (process, port, its first
    line), or (process, None, line) when it printed no address."""
    port = [] if port_given else ["--port", "0"]
    server = subprocess.Popen([acrobat_bin, "serve", MODEL, "--set", "H=64", "--params", params, "--threads", "1",
                               "--max-request-bytes", "1048576"] + port + extra + SERVE_FLAGS, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if port_given else None, text=True, env=env)
    line = server.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/v1/models/treelstm:predict", line)
    if not m and not port_given:
        print("no address in %r" % line, file=sys.stderr)
    return server, (int(m.group(1)) if m else None), line


def stop(server):
    if server.poll() is None:
        server.kill()
        server.wait()


def post(port, body, name="treelstm", content_type="application/json", path=None, headers=None, timeout=60):
    """(status, parsed JSON answer) of a predict request; `body` is text or raw bytes."""
    data = body if isinstance(body, bytes) else body.encode()
    url = "http://127.0.0.1:%d%s" % (port, path or "/v1/models/%s:predict" % name)
    req = urllib.request.Request(url, data=data, headers=dict({"Content-Type": content_type}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(port, path, headers=None, timeout=60):
    """(status, text, headers) of a GET."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


def at_once(port, bodies):
    """Posts every body at the same moment (one thread each, released together)."""
    gate = threading.Barrier(len(bodies))

    def one(b):
        gate.wait()
        return post(port, b)

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(one, bodies))


def close(a, b, rtol=1e-5, atol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b))


def predicts(port, model, i, timeout=60):
    """Whether a request of tree i is answered 200 with `acrobat run`'s output."""
    try:
        status, body = post(port, json.dumps({"instances": [model.trees[i]]}), timeout=timeout)
    except OSError:
        return False
    return status == 200 and close(body["predictions"][0]["data"], model.expected[i])


def metric(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def metrics(port, headers=None):
    return get(port, "/metrics", headers)[1]


def rss_mib(pid):
    """The resident set of process `pid` in MiB (VmRSS of /proc/PID/status)."""
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) / 1024


def exchange(port, data, half_close=True, timeout=10):
    """Sends raw bytes on a new connection (then shuts its sending side when `half_close`) and reads
    until the server closes or `timeout`: (seconds taken, status or None, parsed JSON body or None,
    raw answer)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    begin = time.time()
    answer = b""
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b:
                break
            answer += b
            if answer_complete(answer):
                break
    except OSError:
        pass
    finally:
        s.close()
    return (time.time() - begin,) + parse_answer(answer) + (answer,)


def final_answer(raw):
    """`raw` without the interim answers (1xx) before the final one."""
    while re.match(rb"HTTP/1\.1 1\d\d .*?\r\n\r\n", raw, re.S):
        raw = raw.partition(b"\r\n\r\n")[2]
    return raw


def answer_complete(raw):
    head, sep, body = final_answer(raw).partition(b"\r\n\r\n")
    m = re.search(rb"content-length: *(\d+)", head, re.I)
    return bool(sep) and m is not None and len(body) >= int(m.group(1))


def parse_answer(raw):
    """(status, JSON body) of the final answer in `raw` (after any interim 1xx), or (None, None)."""
    head, _, body = final_answer(raw).partition(b"\r\n\r\n")
    m = re.match(rb"HTTP/1\.[01] (\d+)", head)
    if not m:
        return None, None
    try:
        return int(m.group(1)), json.loads(body)
    except ValueError:
        return int(m.group(1)), None
