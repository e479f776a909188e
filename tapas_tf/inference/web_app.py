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

Every error is JSON, `{"error": "a sentence for the user"}`, with a 4xx status for bad input and
500 for a failure of ours (logged with its traceback); either way the server goes on serving.

Why Starlette and uvicorn rather than Gradio: the page is one form and a table. Starlette is a
small pure-Python dependency with a test client that calls the app in-process, so every endpoint
and every bad input is tested without a browser or a port; Gradio would bring a large front-end
bundle and its own server for the same page. The model runs on a thread pool, one request at a
time (TensorFlow's traced functions and the encoder's cache are shared), which costs nothing at
the tiny model's few milliseconds per question.
"""

import dataclasses
import functools
import json
import logging
import os
import socket
import threading
import time
from typing import Awaitable, Callable, Dict, Optional

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tapas_tf.inference.table_qa import TableQA
from tapas_tf.inference.tables import AskError
from tapas_tf.inference.web_sessions import (
    SessionStore,
    WebError,
    WebLimits,
    answer_view,
    check_question,
    example_tables,
    load_example,
    load_upload,
    table_view,
)

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web_static")
# Loopback only: the page reads the user's tables, and nothing in it authenticates anyone.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_MAX_JSON_BYTES = 64 * 1024
logger = logging.getLogger(__name__)


@dataclasses.dataclass
class _WebState:
    qa: TableQA
    limits: WebLimits
    sessions: SessionStore
    model_name: str
    model_lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


def create_app(qa: TableQA, limits: WebLimits = WebLimits(), model_name: str = "") -> Starlette:
    """The app serving the page and its endpoints for one loaded model."""
    routes = [
        Route("/", _page, methods=["GET"]),
        Route("/favicon.ico", _favicon, methods=["GET"]),
        Route("/api/info", _info, methods=["GET"]),
        Route("/api/table", _upload, methods=["POST"]),
        Route("/api/example", _example, methods=["POST"]),
        Route("/api/ask", _ask, methods=["POST"]),
        Route("/api/reset", _reset, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.web = _WebState(qa, limits, SessionStore(limits.max_sessions), model_name)
    return app


def server_config(app: Starlette, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                  log_level: str = "info") -> uvicorn.Config:
    """How uvicorn serves the app: on `host` (loopback unless told otherwise), one process."""
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, workers=1)


def run_server(app: Starlette, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serves the app until interrupted (Ctrl-C); uvicorn logs the address and each request."""
    uvicorn.Server(server_config(app, host, port)).run()


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

    return respond


# --- reading requests ---------------------------------------------------------------------------


async def _read_body(request: Request, max_bytes: int, too_large: str) -> bytes:
    """The body; WebError(413, `too_large`) past `max_bytes`, without reading the rest."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise WebError(too_large, 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise WebError(too_large, 413)
    return b"".join(chunks)


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
    return {"model": web.model_name, "examples": example_tables(), "threshold": web.qa.rule.threshold,
            "limits": dataclasses.asdict(web.limits)}


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
async def _ask(request: Request, web: _WebState) -> Dict:
    body = await _json_body(request)
    return await run_in_threadpool(_answer, web, body.get("session"), body.get("question"))


@_json_endpoint
async def _reset(request: Request, web: _WebState) -> Dict:
    body = await _json_body(request)
    return await run_in_threadpool(_new_conversation, web, body.get("session"))


# --- the work, on the thread pool ---------------------------------------------------------------


def _open_session(web: _WebState, name: str, load: Callable) -> Dict:
    """Reads the table and converts it, once: every question of the session reuses the conversion."""
    frame = load()
    with web.model_lock:
        conversation = web.qa.conversation(frame)
    session = web.sessions.open(os.path.basename(name), conversation)
    return dict(table_view(session, web.limits), history=[])


def _answer(web: _WebState, session_id: Optional[str], question: object) -> Dict:
    session = web.sessions.get(session_id)
    question = check_question(question, web.limits)
    with web.model_lock:
        start = time.perf_counter()
        result = session.conversation.ask(question)
        elapsed_ms = (time.perf_counter() - start) * 1000
    return answer_view(session, result, web.limits, elapsed_ms, web.model_name)


def _new_conversation(web: _WebState, session_id: Optional[str]) -> Dict:
    session = web.sessions.get(session_id)
    with web.model_lock:
        session.conversation.reset()
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
