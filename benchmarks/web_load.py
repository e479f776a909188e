"""The web server under load and hostile input: `python -m tapas_tf.serve` in a subprocess, clients over HTTP.

    python benchmarks/web_load.py                                  # this checkout, the bundled model
    python benchmarks/web_load.py --repo /tmp/web_before --json_out /tmp/before.json   # another checkout
    python benchmarks/web_load.py --load_only --server_flag=--noaccess_log   # the server without its access log

Starts the server of --repo (its `tapas_tf`, run with this interpreter) on a free loopback port,
warmed up as the command does, and then:

1. Load: for each of --clients (1, 5, 20), that many clients, each on its own keep-alive connection
   and in its own session (an example table), ask --questions questions in all (split evenly), all
   clients starting together. Each conversation restarts every --turns questions, so that answers
   (which carry the conversation so far) stay the same size; that question's time includes the
   restart. Reported: questions per second over the wall time of the level, the p50 / p99 / max
   of the client-measured round trips, and the CPU time the server process (all its threads) and
   this script's clients spent per question (from /proc; on a machine shared with other work the
   CPU time per question is steadier than the throughput, which follows whatever CPU is left).
2. A hostile upload: one client asks questions back to back while another uploads a CSV of one row
   and --wide_columns columns (about 0.85 MiB at 100,000). Reported: the upload's status, its round
   trip, and the slowest question that overlapped it (against the same client's median before it).
   A request still unanswered after --wide_timeout seconds is given up and reported as such.
3. Oversized bodies: --oversized_tries raw-socket requests to /api/ask with a 3 MB body, each sent in
   full before the response is read. Reported: how many got the 413 JSON and how many saw the
   connection reset (broken pipe) instead.

Every request has a timeout and the number of requests is fixed, so the script ends. Run it with
`nice -n 19` beside other work and say what else ran: the clients share the machine's cores with the
server.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

from machine import machine, machine_line  # noqa: E402  (benchmarks/machine.py)

EXAMPLE = "shooting_1988_medals.csv"
QUESTIONS = ("which nation won the most gold medals?", "which nations won no silver medals?",
             "what is the total of the soviet union?", "which nations are ranked 4?",
             "how many bronze medals did yugoslavia win?", "which nation is ranked first?")
TIMEOUT = 120.0


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=ROOT, help="the checkout whose tapas_tf serves (default: this one)")
    parser.add_argument("--model_dir", default=None, help="default: the bundled model")
    parser.add_argument("--clients", default="1,5,20", help="concurrency levels, comma-separated")
    parser.add_argument("--questions", type=int, default=200, help="questions per level")
    parser.add_argument("--turns", type=int, default=5, help="questions per conversation before a reset")
    parser.add_argument("--wide_columns", type=int, default=100_000)
    parser.add_argument("--wide_timeout", type=float, default=120.0,
                        help="seconds before the wide upload, or a question meanwhile, is given up")
    parser.add_argument("--oversized_tries", type=int, default=20)
    parser.add_argument("--server_flag", action="append", default=[],
                        help="a flag for the server command, repeatable (e.g. --server_flag=--noaccess_log)")
    parser.add_argument("--load_only", action="store_true", help="only the load levels (step 1)")
    parser.add_argument("--json_out", default=None)
    return parser.parse_args(argv)


# --- the server -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(repo: str, model_dir: Optional[str], port: int,
                 flags: Sequence[str] = ()) -> Tuple[subprocess.Popen, float]:
    """The server process and its start-up seconds (model load and warm-up); it logs to a pipe we drain."""
    command = [sys.executable, "-m", "tapas_tf.serve", f"--port={port}", *flags]
    if model_dir:
        command.append(f"--model_dir={model_dir}")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": repo}
    start = time.perf_counter()
    server = subprocess.Popen(command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    log: List[str] = []
    threading.Thread(target=lambda: log.extend(server.stdout), daemon=True).start()
    deadline = time.monotonic() + 600
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}: {''.join(log)[-2000:]}")
        try:
            status, _ = request("127.0.0.1", port, "GET", "/api/info")
            if status == 200:
                return server, time.perf_counter() - start
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.kill()
            raise RuntimeError("the server did not answer /api/info within 600 s")
        time.sleep(0.5)


def stop_server(server: subprocess.Popen) -> int:
    server.terminate()
    try:
        return server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        return server.wait()


# --- clients --------------------------------------------------------------------------------------


def request(host: str, port: int, method: str, path: str, body: Optional[bytes] = None,
            connection: Optional[http.client.HTTPConnection] = None) -> Tuple[int, Dict]:
    """(status, JSON body) of one request, on `connection` (kept alive) or a new one."""
    own = connection is None
    connection = connection or http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else {}
    finally:
        if own:
            connection.close()


class Client:
    """One browser: a keep-alive connection and a session about the example table."""

    def __init__(self, port: int, turns: int, timeout: float = TIMEOUT):
        self.port = port
        self.turns = turns
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.session = self._post("/api/example", {"name": EXAMPLE})["session"]
        self.asked = 0

    def _post(self, path: str, payload: Dict) -> Dict:
        data = json.dumps(payload).encode()
        status, body = request("127.0.0.1", self.port, "POST", path, data, self.connection)
        if status != 200:
            raise RuntimeError(f"POST {path}: {status} {body}")
        return body

    def ask(self) -> Tuple[float, float]:
        """(start, seconds) of one question, measured here. The conversation restarts every `turns`
        questions, and that question's time includes the restart (POST /api/reset)."""
        start = time.perf_counter()
        if self.asked and self.asked % self.turns == 0:
            self._post("/api/reset", {"session": self.session})
        question = QUESTIONS[self.asked % len(QUESTIONS)]
        self.asked += 1
        self._post("/api/ask", {"session": self.session, "question": question})
        return start, time.perf_counter() - start

    def close(self) -> None:
        self.connection.close()


def quantile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def cpu_seconds(pid: int) -> Optional[float]:
    """User + system CPU seconds of process `pid` and all its threads so far; None without /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime.


def load_level(port: int, clients: int, questions: int, turns: int, server_pid: Optional[int] = None) -> Dict:
    """`questions` questions from `clients` concurrent clients: throughput, latency quantiles, and
    the CPU milliseconds per question of the server (`server_pid`) and of these clients."""
    pool = [Client(port, turns) for _ in range(clients)]
    for client in pool:  # Not timed: the first question of a session.
        client.ask()
    shares = [questions // clients + (1 if i < questions % clients else 0) for i in range(clients)]
    latencies: List[float] = []
    errors: List[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def run(client: Client, share: int) -> None:
        mine = []
        barrier.wait()
        try:
            for _ in range(share):
                mine.append(client.ask()[1])
        except Exception as e:  # noqa: BLE001 (reported, not fatal: the level's numbers say what completed)
            with lock:
                errors.append(f"{type(e).__name__}: {e}")
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(c, s)) for c, s in zip(pool, shares)]
    for thread in threads:
        thread.start()
    server_before, own_before = cpu_seconds(server_pid) if server_pid else None, _own_cpu()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    server_after, own_after = cpu_seconds(server_pid) if server_pid else None, _own_cpu()
    for client in pool:
        client.close()
    per_question = 1000 / max(len(latencies), 1)
    return {"clients": clients, "questions": len(latencies), "errors": errors, "seconds": round(wall, 3),
            "per_second": round(len(latencies) / wall, 1),
            "p50_ms": round(1000 * statistics.median(latencies), 1),
            "p99_ms": round(1000 * quantile(latencies, 0.99), 1), "max_ms": round(1000 * max(latencies), 1),
            "server_cpu_ms": None if server_after is None else round((server_after - server_before) * per_question, 2),
            "client_cpu_ms": round((own_after - own_before) * per_question, 2)}


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


# --- hostile input --------------------------------------------------------------------------------


def wide_csv(columns: int) -> bytes:
    header = ",".join(f"c{i}" for i in range(columns))
    return (header + "\n" + ",".join("x" for _ in range(columns)) + "\n").encode()


def wide_upload(port: int, columns: int, timeout: float) -> Dict:
    """A wide upload while another session asks back to back: the upload's round trip and the
    slowest question that overlapped it. A request without an answer after `timeout` seconds is
    given up and reported as such (the question's wait then counts up to the upload's end)."""
    client = Client(port, turns=5, timeout=timeout)
    timings: List[Tuple[float, float]] = []
    asking = {"since": None, "error": ""}
    stop, warmed = threading.Event(), threading.Event()

    def ask_in_a_loop() -> None:
        while not stop.is_set():
            asking["since"] = time.perf_counter()
            try:
                timings.append(client.ask())
            except OSError as e:
                asking["error"] = f"a question got no answer: {type(e).__name__}"
                return
            asking["since"] = None
            if len(timings) >= 10:
                warmed.set()

    asker = threading.Thread(target=ask_in_a_loop, daemon=True)
    asker.start()
    warmed.wait(timeout=timeout)
    before = [seconds for _, seconds in timings]
    data = wide_csv(columns)
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", f"/api/table?name=wide_{columns}.csv", body=data,
                           headers={"Content-Type": "text/csv"})
        response = connection.getresponse()
        status, error = response.status, json.loads(response.read()).get("error", "")
    except OSError as e:
        status, error = f"no answer ({type(e).__name__})", ""
    end = time.perf_counter()
    connection.close()
    waiting = asking["since"]
    time.sleep(0.5)
    stop.set()
    asker.join(timeout)
    client.close()
    overlapping = [seconds for started, seconds in timings if started < end and started + seconds > start]
    if waiting is not None:  # A question still unanswered when the upload ended: its wait so far.
        overlapping.append(end - waiting)
    return {"columns": columns, "bytes": len(data), "status": status, "error": error,
            "upload_ms": round(1000 * (end - start), 1), "questions_during": len(overlapping),
            "slowest_question_during_ms": round(1000 * max(overlapping, default=0.0), 1),
            "median_question_before_ms": round(1000 * statistics.median(before), 1),
            "asker_error": asking["error"]}


def oversized_body(port: int, size: int = 3_000_000) -> str:
    """One raw request with a `size`-byte body sent in full before reading: "413", or what went wrong."""
    head = (f"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\nConnection: close\r\n\r\n").encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
            s.sendall(head + b" " * size)
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
    except OSError as e:
        return type(e).__name__
    status_line, _, rest = reply.partition(b"\r\n")
    if b" 413 " in status_line and b'"error"' in rest:
        return "413"
    return status_line.decode(errors="replace") or "empty reply"


def oversized(port: int, tries: int) -> Dict:
    outcomes: Dict[str, int] = {}
    for _ in range(tries):
        outcome = oversized_body(port)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return {"tries": tries, "outcomes": outcomes}


# --- report ---------------------------------------------------------------------------------------


def print_hostile(report: Dict) -> None:
    wide = report["wide_upload"]
    print(f"{wide['columns']:,}-column upload ({wide['bytes']:,} bytes): {wide['status']} "
          f"in {wide['upload_ms']} ms ({wide['error']}); slowest of {wide['questions_during']} questions "
          f"meanwhile {wide['slowest_question_during_ms']} ms "
          f"(median before {wide['median_question_before_ms']} ms)"
          + (f"; {wide['asker_error']}" if wide["asker_error"] else ""))
    print(f"3 MB question bodies: {report['oversized']['outcomes']} of {report['oversized']['tries']}")


def main(argv: List[str]) -> None:
    args = parse_args(argv)
    port = free_port()
    server, startup = start_server(os.path.abspath(args.repo), args.model_dir, port, args.server_flag)
    report: Dict = {"repo": os.path.abspath(args.repo), "server_flags": args.server_flag, "machine": machine(),
                    "startup_seconds": round(startup, 1)}
    try:
        report["load_average"] = {"start": [round(x, 2) for x in os.getloadavg()]}
        report["levels"] = [load_level(port, int(c), args.questions, args.turns, server.pid)
                            for c in args.clients.split(",")]
        if not args.load_only:
            report["wide_upload"] = wide_upload(port, args.wide_columns, args.wide_timeout)
            report["oversized"] = oversized(port, args.oversized_tries)
    finally:
        report.setdefault("load_average", {})["end"] = [round(x, 2) for x in os.getloadavg()]
        report["exit_code"] = stop_server(server)
    print(f"{args.repo}: {machine_line(report['machine'])}; server start-up {startup:.1f} s")
    print(f"load average (1, 5, 15 min) at the start {report['load_average'].get('start')}, "
          f"at the end {report['load_average']['end']}")
    print("| clients | questions | questions/s | p50 ms | p99 ms | max ms | server CPU ms/question | "
          "client CPU ms/question | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for level in report["levels"]:
        print(f"| {level['clients']} | {level['questions']} | {level['per_second']} | {level['p50_ms']} | "
              f"{level['p99_ms']} | {level['max_ms']} | {level['server_cpu_ms']} | {level['client_cpu_ms']} | "
              f"{len(level['errors'])} |")
    if "wide_upload" in report:
        print_hostile(report)
    print(f"server exit code after SIGTERM: {report['exit_code']}")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
