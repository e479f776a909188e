"""The web page of the ask API: a small Starlette app, one page and a few JSON endpoints.

    app = create_app(TableQA.from_model_dir(model_dir))
    uvicorn.Server(server_config(app)).run()        # http://127.0.0.1:8000, this machine only

    GET  /                        the page (`web_static/`: index.html, app.js, style.css, favicon.svg)
    GET  /favicon.ico             the page's icon (favicon.svg), for browsers that ask for it there
    GET  /api/info                the model's name, the example tables, the limits
    POST /api/table?name=F.csv    the CSV file as the request body -> a new session and its table
    POST /api/example             {"name": "shooting_1988_medals.csv"} -> the same, for an example
    POST /api/ask                 {"session": id, "question": "..."} -> the answer and the marked table
    POST /api/reset               {"session": id} -> a new conversation about the same table
    POST /api/verify              {"session": id, "statement": "..."} -> is it true of the table? (with a
                                  TabFact model: `create_app(..., fact_checker=...)`)
    POST /api/collection          {} -> a new session over the server's collection of tables (with
                                  `create_app(..., collection=web_collections.load_served_collection(...))`)
    POST /api/collection/upload?name=a.csv&size=120&name=b.csv&size=300
                                  the files one after the other as the body -> a session over them,
                                  indexed for it (`web_collections.upload_request` builds it)

In a collection session /api/ask answers from the collection: the first question reads the best-
matching tables and keeps the best answer, follow-ups stay with its table, and each answer names
the table (`table_id`, `table_title`, `table_source`, `table_line`) and the first answer's
`runners_up`; /api/reset lets the next question choose the table again. /api/info says whether
the server has a collection (`collection`: its name, source and number of tables).

Every error is JSON, `{"error": "a sentence for the user"}`, with a 4xx status for bad input and
500 for a failure of ours (logged with its traceback); either way the server goes on serving.

Why Starlette and uvicorn rather than Gradio: the page is one form and a table. Starlette is a
small pure-Python dependency with a test client that calls the app in-process, so every endpoint
and every bad input is tested without a browser or a port; Gradio would bring a large front-end
bundle and its own server for the same page.

Requests run on a thread pool: reading and converting a table, or encoding a question, never waits
for another request. Only the model is shared: with TensorFlow, the questions of concurrent
requests go to one `batching.QuestionBatcher`, which runs them together in one model call; with
LiteRT, each request runs its own question on one of the runner's interpreters (`lite_model`),
which answer one question per call anyway, in parallel. A body larger than its
limit is read and thrown away (up to 32 MiB) before the 413, so that a client still sending it
reads the answer instead of a reset connection. `run_server` stops on Ctrl-C or SIGTERM after
finishing the requests in flight (at most 30 s more), and returns.
"""

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import socket
import threading
import time
from typing import AsyncIterator, Awaitable, Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tapas_tf.qa.collection_qa import CollectionQA
from tapas_tf.qa.fact_checker import TableFactChecker
from tapas_tf.qa.table_qa import TableQA
from tapas_tf.qa.tables import AskError
from tapas_tf.serving.batching import DirectAnswers, QuestionBatcher, answerer_for
from tapas_tf.serving.web_collections import (
    READER_THREADS,
    BatchedReader,
    ServedCollection,
    SharedCollectionQA,
    index_uploads,
    split_upload,
)
from tapas_tf.serving.web_sessions import (
    SessionStore,
    WebError,
    WebLimits,
    answer_view,
    ask_in_session,
    check_question,
    example_tables,
    load_example,
    load_upload,
    reset_session,
    session_frame,
    table_view,
    verdict_view,
)

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web_static")
# Loopback only: the page reads the user's tables, and nothing in it authenticates anyone.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_MAX_JSON_BYTES = 64 * 1024
# A refused body up to this size is read and thrown away before the 413 (see the module docstring).
_MAX_DRAIN_BYTES = 32 * 2**20
# Seconds that requests in flight get to finish once the server is told to stop.
_GRACEFUL_SECONDS = 30
logger = logging.getLogger(__name__)


@dataclasses.dataclass
class _WebState:
    qa: TableQA
    limits: WebLimits
    sessions: SessionStore
    model_name: str
    batcher: Union[QuestionBatcher, DirectAnswers]
    # A TabFact model for "check a statement", or a function that loads it on first use; None: no such mode.
    fact_checker: Union[None, TableFactChecker, Callable[[], TableFactChecker]] = None
    fact_checker_lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    # The server's collection of tables, and the one CollectionQA its sessions share; None: none.
    collection: Optional[ServedCollection] = None
    collection_qa: Optional[SharedCollectionQA] = None
    # The model as a collection reads it: every call through `batcher` (web_collections.BatchedReader).
    reader: Optional[BatchedReader] = None
    pool: Optional[concurrent.futures.ThreadPoolExecutor] = None

    def checker(self) -> TableFactChecker:
        """The TabFact model (loaded now if it is not yet); WebError 404 when the server has none."""
        if self.fact_checker is None:
            raise WebError("this server checks no statements: start it with a TabFact model "
                           "(--tabfact_model_dir=DIR)", 404)
        with self.fact_checker_lock:
            if callable(self.fact_checker) and not isinstance(self.fact_checker, TableFactChecker):
                self.fact_checker = self.fact_checker()
        return self.fact_checker


def create_app(qa: TableQA, limits: WebLimits = WebLimits(), model_name: str = "",
               batcher: Union[QuestionBatcher, DirectAnswers, None] = None,
               fact_checker: Union[None, TableFactChecker, Callable[[], TableFactChecker]] = None,
               collection: Optional[ServedCollection] = None) -> Starlette:
    """The app serving the page and its endpoints for one loaded model; `batcher` runs the model for
    concurrent questions, and stops with the app (default `batching.answerer_for` the model's
    runner: batched calls for TensorFlow, each request's own call for LiteRT). `fact_checker` (a
    TabFact model, or a function that loads one when the first statement comes) turns on the page's
    "check a statement" mode. `collection` (`web_collections.load_served_collection`) starts the
    page in collection mode."""
    routes = [
        Route("/", _page, methods=["GET"]),
        Route("/favicon.ico", _favicon, methods=["GET"]),
        Route("/api/info", _info, methods=["GET"]),
        Route("/api/table", _upload, methods=["POST"]),
        Route("/api/example", _example, methods=["POST"]),
        Route("/api/ask", _ask, methods=["POST"]),
        Route("/api/reset", _reset, methods=["POST"]),
        Route("/api/verify", _verify, methods=["POST"]),
        Route("/api/collection", _collection, methods=["POST"]),
        Route("/api/collection/upload", _upload_collection, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error}, lifespan=_lifespan)
    web = _WebState(qa, limits, SessionStore(limits.max_sessions), model_name,
                    batcher or answerer_for(qa.runner, qa.answer_encoded), fact_checker)
    # Threads start only when a collection's first question hands its tables over.
    web.pool = concurrent.futures.ThreadPoolExecutor(READER_THREADS, thread_name_prefix="collection-reader")
    web.reader = BatchedReader(qa, web.batcher.answer, web.pool)
    if collection is not None:
        web.collection = collection
        web.collection_qa = SharedCollectionQA(collection.index, web.reader, k=collection.k,
                                               method=collection.method)
    app.state.web = web
    return app


def fact_checker_loader(directory: Optional[str], vocab_file: Optional[str] = None
                        ) -> Optional[Callable[[], TableFactChecker]]:
    """For `create_app(fact_checker=...)`: a function that loads the TabFact model in `directory` on
    first use (default the bundled one, if the installation has it), or None for no "check a
    statement" mode ("none", or nothing bundled). A directory without a model config fails now."""
    from tapas_tf.checkpoints import bundled, model_dir  # pylint: disable=import-outside-toplevel

    if directory and directory.lower() == "none":
        return None
    if directory is None:
        if not model_dir.has_compact_weights(bundled.TABFACT_DIR):
            return None
        directory = bundled.TABFACT_DIR
    model_dir.require_config(directory)
    name = (f"bundled {os.path.basename(directory)}" if directory == bundled.TABFACT_DIR
            else os.path.basename(os.path.normpath(directory)))

    def load() -> TableFactChecker:
        return TableFactChecker.from_model_dir(directory, vocab_file=vocab_file, name=name)

    load.name = name  # type: ignore[attr-defined]  # For /api/info before the model loads.
    return load


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    yield
    # After the requests in flight: uvicorn waits for them (at most _GRACEFUL_SECONDS) first.
    await run_in_threadpool(app.state.web.batcher.close, _GRACEFUL_SECONDS)
    app.state.web.pool.shutdown(wait=False)


def server_config(app: Starlette, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                  log_level: str = "info", access_log: bool = True) -> uvicorn.Config:
    """How uvicorn serves the app: on `host` (loopback unless told otherwise), one process, with a
    log line per request unless `access_log` is off."""
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1, access_log=access_log,
                          timeout_graceful_shutdown=_GRACEFUL_SECONDS)


class _Server(uvicorn.Server):
    """uvicorn's server, stopping on SIGINT (Ctrl-C) or SIGTERM as a command should: it stops
    listening, finishes the requests in flight, and returns. (uvicorn raises the signal again once
    it has stopped, which ends the process in a KeyboardInterrupt traceback, or killed by SIGTERM.)
    A second Ctrl-C stops waiting for the requests in flight."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # Only the main thread receives signals; a ServerThread stops by should_exit.
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_server(app: Starlette, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
               access_log: bool = True) -> None:
    """Serves the app until Ctrl-C or SIGTERM, then returns; uvicorn logs the address, and each
    request unless `access_log` is off."""
    _Server(server_config(app, host, port, access_log=access_log)).run()


# --- errors -----------------------------------------------------------------------------------


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _http_error(request: Request, error: HTTPException) -> Response:
    """Unknown paths and wrong methods answer in JSON too."""
    return _error(f"{request.method} {request.url.path}: {error.detail}", error.status_code)


Endpoint = Callable[[Request, _WebState], Awaitable[Dict]]


def _json_endpoint(endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint's dict as JSON; bad input as a 4xx sentence; any other failure as a 500."""

    @functools.wraps(endpoint)
    async def respond(request: Request) -> Response:
        try:
            return JSONResponse(await endpoint(request, request.app.state.web))
        except WebError as e:
            return _error(str(e), e.status)
        except AskError as e:
            return _error(str(e), 400)
        except Exception:  # noqa: BLE001 (one request's failure must not take the server down)
            logger.exception("%s %s failed", request.method, request.url.path)
            return _error("the server failed to answer this request (its log says why); try again, or "
                          "try another table or question", 500)
        except asyncio.CancelledError:  # uvicorn stopping: the requests in flight ran out of time.
            logger.warning("%s %s was still running when the server stopped", request.method,
                           request.url.path)
            return _error("the server stopped before it could answer; ask again once it is back", 503)

    return respond


# --- reading requests ---------------------------------------------------------------------------


async def _read_body(request: Request, max_bytes: int, too_large: str) -> bytes:
    """The body; WebError(413, `too_large`) past `max_bytes`, keeping at most `max_bytes` of it."""
    stream = request.stream()
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        if int(declared) <= _MAX_DRAIN_BYTES:
            await _drain(request, stream, 0)
        raise WebError(too_large, 413)
    chunks, size = [], 0
    async for chunk in stream:
        size += len(chunk)
        if size > max_bytes:
            await _drain(request, stream, size)
            raise WebError(too_large, 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def _drain(request: Request, stream: AsyncIterator[bytes], received: int) -> None:
    """Reads the rest of a refused body, up to _MAX_DRAIN_BYTES in all, and throws it away.

    Answering while the client still sends would close the connection on unread bytes: the
    client's kernel then gets a reset, and the client a broken pipe instead of the 413.
    """
    if "100-continue" in request.headers.get("expect", "").lower():
        return  # The client waits for our answer before it sends the body, and will not send it.
    async for chunk in stream:
        received += len(chunk)
        if received > _MAX_DRAIN_BYTES:
            return


async def _json_body(request: Request) -> Dict:
    data = await _read_body(request, _MAX_JSON_BYTES, f"the request is larger than {_MAX_JSON_BYTES:,} bytes")
    try:
        body = json.loads(data or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise WebError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise WebError("the request body is not a JSON object")
    return body


# --- endpoints ----------------------------------------------------------------------------------


async def _page(request: Request) -> Response:
    return FileResponse(os.path.join(STATIC_DIR, "index.html"), media_type="text/html")


async def _favicon(request: Request) -> Response:
    return FileResponse(os.path.join(STATIC_DIR, "favicon.svg"), media_type="image/svg+xml",
                        headers={"Cache-Control": "max-age=86400"})


@_json_endpoint
async def _info(request: Request, web: _WebState) -> Dict:
    checker = web.fact_checker
    return {"model": web.model_name, "aggregation_model": web.qa.aggregation_model_name,
            "fact_checker": None if checker is None else getattr(checker, "name", "a TabFact model"),
            "examples": example_tables(), "threshold": web.qa.rule.threshold,
            "limits": dataclasses.asdict(web.limits),
            "collection": None if web.collection is None else web.collection.info.to_dict()}


@_json_endpoint
async def _upload(request: Request, web: _WebState) -> Dict:
    name = request.query_params.get("name", "")
    data = await _read_body(request, web.limits.max_upload_bytes,
                            f"{os.path.basename(name) or 'the upload'} is larger than "
                            f"{web.limits.max_upload_bytes:,} bytes, the most this page takes")
    return await run_in_threadpool(_open_session, web, name, lambda: load_upload(data, name, web.limits))


@_json_endpoint
async def _example(request: Request, web: _WebState) -> Dict:
    name = str((await _json_body(request)).get("name", ""))
    return await run_in_threadpool(_open_session, web, name, lambda: load_example(name, web.limits))


@_json_endpoint
async def _collection(request: Request, web: _WebState) -> Dict:
    await _json_body(request)  # Read, so a client sending one is answered; nothing in it is needed.
    return await run_in_threadpool(_open_collection_session, web)


@_json_endpoint
async def _upload_collection(request: Request, web: _WebState) -> Dict:
    names, sizes = request.query_params.getlist("name"), request.query_params.getlist("size")
    limits = web.limits
    # The body is read (up to its limit) before any refusal, so the client reads the answer (`_drain`).
    data = await _read_body(request, limits.max_collection_bytes,
                            f"the files are larger than {limits.max_collection_bytes:,} bytes together, the "
                            "most this page takes at once")
    files = split_upload(names, sizes, data, limits)
    return await run_in_threadpool(_open_uploaded_collection, web, files)


@_json_endpoint
async def _ask(request: Request, web: _WebState) -> Dict:
    body = await _json_body(request)
    return await run_in_threadpool(_answer, web, body.get("session"), body.get("question"))


@_json_endpoint
async def _verify(request: Request, web: _WebState) -> Dict:
    body = await _json_body(request)
    return await run_in_threadpool(_check_statement, web, body.get("session"), body.get("statement"))


@_json_endpoint
async def _reset(request: Request, web: _WebState) -> Dict:
    body = await _json_body(request)
    return await run_in_threadpool(_new_conversation, web, body.get("session"))


# --- the work, on the thread pool ---------------------------------------------------------------


def _open_session(web: _WebState, name: str, load: Callable) -> Dict:
    """Reads the table and converts it, once: every question of the session reuses the conversion.
    No lock: other sessions' questions go on meanwhile."""
    conversation = web.qa.conversation(load())
    session = web.sessions.open(os.path.basename(name), conversation)
    return dict(table_view(session, web.limits), history=[])


def _open_collection_session(web: _WebState) -> Dict:
    """A new conversation over the server's collection: its first question chooses the table."""
    if web.collection is None:
        raise WebError("this server has no collection of tables: start it with --index_dir=DIR or "
                       "--tables=DIR, or upload several files at once", 404)
    info = web.collection.info
    session = web.sessions.open(info.name, web.collection_qa.conversation(), collection=info)
    return dict(table_view(session, web.limits), history=[])


def _open_uploaded_collection(web: _WebState, files: Sequence[Tuple[str, bytes]]) -> Dict:
    """Indexes the uploaded files for a new session, which keeps their folder while it lives."""
    uploaded = index_uploads(files, web.limits)
    # Only this session asks it, a question at a time (`Session.lock`): no lock, and a small cache.
    cqa = CollectionQA(uploaded.index, web.reader, k=uploaded.info.k, cache_tables=uploaded.info.k)
    session = web.sessions.open(uploaded.info.name, cqa.conversation(), collection=uploaded.info,
                                keeps=uploaded.folder)
    return dict(table_view(session, web.limits), history=[])


def _answer(web: _WebState, session_id: Optional[str], question: object) -> Dict:
    session = web.sessions.get(session_id)
    question = check_question(question, web.limits)
    with session.lock:  # The view shows the conversation up to this answer, not a later question's.
        start = time.perf_counter()
        result = ask_in_session(session, question, web.batcher.answer)
        elapsed_ms = (time.perf_counter() - start) * 1000
        return answer_view(session, result, web.limits, elapsed_ms, web.model_name)


def _check_statement(web: _WebState, session_id: Optional[str], statement: object) -> Dict:
    """The verdict on a statement about the session's table; the conversation is left as it is."""
    session = web.sessions.get(session_id)
    statement = check_question(statement, web.limits, "statement")
    checker = web.checker()
    start = time.perf_counter()
    result = checker.verify(session_frame(session), statement)
    return verdict_view(result, (time.perf_counter() - start) * 1000)


def _new_conversation(web: _WebState, session_id: Optional[str]) -> Dict:
    session = web.sessions.get(session_id)
    reset_session(session)
    return dict(table_view(session, web.limits), history=[])


# --- serving from a thread (tests, scripts, notebooks) ------------------------------------------


class ServerThread:
    """uvicorn serving an app from a daemon thread, on a port the OS picks unless given.

        with ServerThread(create_app(qa)) as server:
            requests.get(server.url + "/api/info")

    The socket is bound before the thread starts, so `url` is valid at once and no other process
    can take the port in between.
    """

    def __init__(self, app: Starlette, host: str = DEFAULT_HOST, port: int = 0, log_level: str = "warning"):
        self.config = server_config(app, host, port, log_level)
        self.server = uvicorn.Server(self.config)
        self._socket: Optional[socket.socket] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "ServerThread":
        self._socket = socket.socket(socket.AF_INET6 if ":" in self.config.host else socket.AF_INET)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self.config.host, self.config.port))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]},
                                        name="uvicorn", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start on {self.url}")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
