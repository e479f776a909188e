"""The web server under load and hostile input (tapas_tf/serving/web_app.py, real HTTP on loopback).

- A table with too many columns is refused on its header, before pandas parses the file.
- Converting an upload holds no lock: another session's question is answered meanwhile.
- Concurrent questions share model calls, and each still gets its own session's answer; with a
  LiteRT copy (the bundled model), each request runs its own call, on the runner's interpreters.
- A body over its limit gets the 413 JSON, never a reset connection, however often it is tried.
- `serve` stops on SIGINT and SIGTERM after finishing the request in flight, with exit code 0.

The model is the trained one of test_sequential (answers known: see test_web_app). Order is
arranged with events and the batcher's queue, never with sleeps that a slow machine would break.
"""

import asyncio
import dataclasses
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402
import requests  # noqa: E402

pytest.importorskip("starlette", reason="the web extra: pip install 'tapas-tf[web]'")

from starlette.testclient import TestClient  # noqa: E402

from tapas_tf.qa import tables  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.serving import web_app, web_sessions  # noqa: E402
from tapas_tf.serving.batching import DirectAnswers, QuestionBatcher  # noqa: E402
from tests.inference.test_sequential import ROOT  # noqa: E402
from tests.serving.test_web_app import CITIES_CSV, LIMITS  # noqa: E402

WAIT = 60  # Seconds before a test that waits for an event gives up: a bound, not a measurement.


@pytest.fixture(scope="module")
def qa(trained):
    return TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"])


def upload(url, data=CITIES_CSV, name="cities.csv"):
    return requests.post(f"{url}/api/table", params={"name": name}, data=data, timeout=WAIT)


def ask(url, session, question):
    return requests.post(f"{url}/api/ask", json={"session": session, "question": question}, timeout=WAIT)


def wait_until(condition, what):
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def in_thread(function, *args):
    """Runs function(*args) on a thread; (thread, a one-slot queue that gets its result)."""
    result = queue.Queue(maxsize=1)
    thread = threading.Thread(target=lambda: result.put(function(*args)), daemon=True)
    thread.start()
    return thread, result


# --- columns ---------------------------------------------------------------------------------------


def test_a_100000_column_table_is_refused_on_its_header_before_it_is_parsed(qa, monkeypatch):
    def no_parsing(*args, **kwargs):
        raise AssertionError("pandas parsed a file that its header already refuses")

    monkeypatch.setattr(tables.pd, "read_csv", no_parsing)
    data = (",".join(f"c{i}" for i in range(100_000)) + "\n" + ",".join(["x"] * 100_000) + "\n").encode()
    assert len(data) < web_sessions.WebLimits().max_upload_bytes  # Refused for its columns, not its size.
    with web_app.ServerThread(web_app.create_app(qa)) as server:
        response = upload(server.url, data, "wide.csv")
    assert response.status_code == 400
    assert response.json()["error"] == (
        "wide.csv has 100,000 columns; this page takes tables of up to 1,000 columns (the model reads at "
        "most 255 of them per question); upload the columns you want to ask about")


def test_the_column_limit_is_exact():
    limits = web_sessions.WebLimits(max_table_columns=3)
    assert web_sessions.load_upload(CITIES_CSV, "cities.csv", limits).shape == (3, 3)
    four = b"city,country,population,area\nparis,france,2,1\n"
    with pytest.raises(tables.AskError, match=r"^four.csv has 4 columns; this page takes tables of up to 3 "):
        web_sessions.load_upload(four, "four.csv", limits)


# --- no lock around tables -------------------------------------------------------------------------


def test_another_sessions_question_is_answered_while_an_upload_is_converted(qa, monkeypatch):
    converting, release = threading.Event(), threading.Event()
    prepare = qa.encoder.prepare

    def slow_prepare(table, *args, **kwargs):
        if "slow" in getattr(table, "columns", ()):  # Only the upload under test waits.
            converting.set()
            assert release.wait(WAIT), "the test never released the upload"
        return prepare(table, *args, **kwargs)

    monkeypatch.setattr(qa.encoder, "prepare", slow_prepare)
    with web_app.ServerThread(web_app.create_app(qa, LIMITS)) as server:
        session = upload(server.url).json()["session"]
        thread, result = in_thread(upload, server.url, b"slow,value\nx,1\n", "slow.csv")
        try:
            assert converting.wait(WAIT)
            answer = ask(server.url, session, "which city?")  # While the upload is held in conversion.
            assert answer.status_code == 200 and answer.json()["answer"] == "paris, berlin, london"
            assert thread.is_alive() and result.empty()
        finally:
            release.set()
        thread.join(WAIT)
        table = result.get_nowait()
    assert table.status_code == 200 and table.json()["columns"] == 2


# --- batching -------------------------------------------------------------------------------------


def test_concurrent_questions_share_a_model_call_and_keep_their_sessions_answers(qa):
    hold, entered, release = threading.Event(), threading.Event(), threading.Event()

    def gated(encoded):
        if hold.is_set():  # This call waits, so that the next questions queue behind it.
            hold.clear()
            entered.set()
            assert release.wait(WAIT), "the test never released the held call"
        return qa.answer_encoded(encoded)

    batcher = QuestionBatcher(gated, window_seconds=0)
    limits = dataclasses.replace(LIMITS, max_sessions=3)
    with web_app.ServerThread(web_app.create_app(qa, limits, batcher=batcher)) as server:
        fresh, follow_up, other = (upload(server.url).json()["session"] for _ in range(3))
        assert ask(server.url, follow_up, "what population?").json()["answer"] == "2"
        hold.set()
        _, held = in_thread(ask, server.url, other, "what population?")
        assert entered.wait(WAIT)
        askers = [in_thread(ask, server.url, s, "which city?") for s in (fresh, follow_up)]
        wait_until(lambda: batcher.pending == 2, "both questions queued behind the held call")
        release.set()
        answers = [result.get(timeout=WAIT).json() for _, result in askers]
        assert held.get(timeout=WAIT).json()["answer"] == "2"
    assert batcher.batch_sizes[-2:] == [1, 2]  # Two sessions' questions, one model call.
    # Each in its own conversation: the follow-up sees paris's population and answers berlin.
    assert [a["answer"] for a in answers] == ["paris, berlin, london", "berlin"]
    assert [a["turn"] for a in answers] == [1, 2]


def test_with_litert_concurrent_requests_answer_on_the_runners_interpreters():
    # Its LiteRT copy: a pool of interpreters, no batching (the bundled aggregation model, which runs
    # on TensorFlow, left out: tests/serving/test_web_app.py asks a pair).
    bundled = TableQA.from_model_dir(aggregation_model_dir="none")
    app = web_app.create_app(bundled, dataclasses.replace(LIMITS, max_sessions=6))
    assert bundled.backend == "LiteRT" and isinstance(app.state.web.batcher, DirectAnswers)
    table = os.path.join(web_sessions.EXAMPLE_TABLES_DIR, "shooting_1988_medals.csv")
    questions = ["which nation won the most gold medals?", "which nations won no silver medals?",
                 "which nations are ranked 4?", "which nation is ranked first?", "what is the total of norway?",
                 "how many bronze medals did yugoslavia win?"]
    with web_app.ServerThread(app) as server:
        sessions = [requests.post(f"{server.url}/api/example", json={"name": "shooting_1988_medals.csv"},
                                  timeout=WAIT).json()["session"] for _ in questions]
        askers = [in_thread(ask, server.url, s, q) for s, q in zip(sessions, questions)]
        answers = [result.get(timeout=WAIT).json() for _, result in askers]
    for question, answer in zip(questions, answers):  # Each as the ask API answers it alone.
        expected = bundled.answer(table, question).to_dict()
        assert {k: answer[k] for k in ("question", "answer", "cells")} == {
            k: expected[k] for k in ("question", "answer", "cells")}
    with pytest.raises(RuntimeError, match="shutting down"):  # Closed with the server.
        app.state.web.batcher.answer(None)


# --- oversized bodies -----------------------------------------------------------------------------


def raw_request(url, path, body_size, expect_continue=False):
    """(status line, JSON body) of a raw HTTP request whose `body_size` bytes are all sent before
    the answer is read (unless `expect_continue`: then only the headers); a reset connection raises."""
    host, port = url.removeprefix("http://").split(":")
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {body_size}\r\nConnection: close\r\n"
            + ("Expect: 100-continue\r\n" if expect_continue else "") + "\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=WAIT) as s:
        s.sendall(head if expect_continue else head + b" " * body_size)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    status, _, rest = reply.partition(b"\r\n")
    return status.decode(), json.loads(rest.partition(b"\r\n\r\n")[2])


def test_an_oversized_body_always_gets_the_413_json(qa):
    with web_app.ServerThread(web_app.create_app(qa, LIMITS)) as server:
        for attempt in range(20):
            try:
                status, body = raw_request(server.url, "/api/ask", 3_000_000)
            except OSError as e:
                pytest.fail(f"attempt {attempt}: {type(e).__name__} ({e}) instead of the 413")
            assert status.split()[:2] == ["HTTP/1.1", "413"], (attempt, status)
            assert body == {"error": "the request is larger than 65,536 bytes"}
        status, body = raw_request(server.url, "/api/table?name=big.csv", 3_000_000)
        assert status.split()[1] == "413"
        assert body["error"] == "big.csv is larger than 200,000 bytes, the most this page takes"
        # A client that waits for "100 Continue" gets the 413 at once and never sends the body.
        status, body = raw_request(server.url, "/api/ask", 3_000_000, expect_continue=True)
        assert status.split()[1] == "413" and "larger than" in body["error"]
        assert requests.get(f"{server.url}/api/info", timeout=WAIT).status_code == 200  # Still serving.


# --- stopping -------------------------------------------------------------------------------------


def test_a_request_cut_short_by_the_stop_gets_a_json_503(qa, monkeypatch):
    """uvicorn cancels the requests still running when its graceful stop runs out of time."""
    def cancelled(*args):
        raise asyncio.CancelledError("timeout graceful shutdown exceeded")

    monkeypatch.setattr(web_app, "_answer", cancelled)
    with TestClient(web_app.create_app(qa, LIMITS), raise_server_exceptions=False) as client:
        response = client.post("/api/ask", json={"session": "s", "question": "which city?"})
    assert response.status_code == 503
    assert response.json()["error"] == "the server stopped before it could answer; ask again once it is back"



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """`python -m tapas_tf.serve` with the trained model; its output read line by line."""

    def __init__(self, trained, *flags):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "tapas_tf.serve", f"--model_dir={trained['model_dir']}",
                   f"--vocab_file={trained['vocab']}", f"--port={self.port}", "--nowarm_up", *flags]
        self.process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        self.output = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.output.append(line)
            self.lines.put(line)

    def wait_for_line(self, text):
        deadline = time.monotonic() + 240
        while True:
            try:
                if text in self.lines.get(timeout=max(deadline - time.monotonic(), 0.01)):
                    return
            except queue.Empty:
                pytest.fail(f"the server never said {text!r}: {''.join(self.output)[-3000:]}")

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


@pytest.mark.parametrize("stop,access_log", [(signal.SIGINT, "--access_log"), (signal.SIGTERM, "--noaccess_log")])
def test_serve_stops_on_a_signal_after_the_request_in_flight(trained, stop, access_log):
    server = ServeProcess(trained, "--max_table_columns=3", access_log)
    try:
        server.wait_for_line("Uvicorn running on")
        wide = upload(server.url, b"a,b,c,d\n1,2,3,4\n", "four.csv")
        assert wide.status_code == 400 and "up to 3 columns" in wide.json()["error"]  # The flag's limit.
        session = upload(server.url).json()["session"]
        # Traces the model (--nowarm_up), so that the request in flight below takes milliseconds.
        assert ask(server.url, session, "what population?").json()["answer"] == "2"
        requests.post(f"{server.url}/api/reset", json={"session": session}, timeout=WAIT).raise_for_status()
        body = json.dumps({"session": session, "question": "which city?"}).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as s:
            # "100 Continue" comes when the app starts reading the body: the request is in flight.
            s.sendall((f"POST /api/ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n").encode())
            assert s.recv(1024).startswith(b"HTTP/1.1 100 Continue")
            server.process.send_signal(stop)
            server.wait_for_line("Shutting down")
            s.sendall(body)
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200 OK"), (reply[:300], "".join(server.output)[-3000:])
        assert json.loads(reply.partition(b"\r\n\r\n")[2])["answer"] == "paris, berlin, london"
        assert server.process.wait(WAIT) == 0, "".join(server.output)[-3000:]
    finally:
        server.kill()
    output = "".join(server.output)
    assert "Traceback" not in output and "CancelledError" not in output and "KeyboardInterrupt" not in output
    assert "Finished server process" in output
    # A line per request unless --noaccess_log (the start and the stop are logged either way, above).
    assert ('"POST /api/ask HTTP/1.1" 200' in output) == (access_log == "--access_log"), output[-3000:]
