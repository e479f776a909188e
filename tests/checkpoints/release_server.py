"""A local HTTP server for the tests of released models: a minimal Hugging Face Hub and a file host.

    with ReleaseServer() as server:
        commit = server.add_repo("test-org/tiny", {"config.json": b"{...}", "model.safetensors": b"..."})
        server.add_file("/tapas_models/tapas_sqa_tiny_reset.zip", zip_bytes)
        os.environ["HF_ENDPOINT"] = server.url

The Hub part answers what `huggingface_hub.hf_hub_download` asks: HEAD and GET of
`/{repo_id}/resolve/{revision}/{filename}` (the revision URL-quoted: a branch, or a commit),
with the headers it reads (`X-Repo-Commit`, `ETag`, `Content-Length`), and the Hub's 404s with
their `X-Error-Code` (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`). The file host answers
GET with `Range: bytes=N-` (206, honouring `If-Range`), and `cut_after[path] = N` sends N bytes
of a file and then closes the connection, as a broken download would. Every request is recorded
in `requests` as (method, path, headers).
"""

import hashlib
import http.server
import threading
from typing import Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit


class ReleaseServer:
    """Serves fixture repositories and files on 127.0.0.1 from a background thread."""

    def __init__(self):
        self.repos: Dict[str, Dict[str, Dict]] = {}  # repo_id -> {"refs": {name: commit}, "commits": {...}}
        self.files: Dict[str, bytes] = {}  # path -> bytes
        self.cut_after: Dict[str, int] = {}  # path -> bytes sent before the connection is closed
        self.requests: List[Tuple[str, str, Dict[str, str]]] = []
        self._server: Optional[http.server.ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # --- content ----------------------------------------------------------------------------------

    def add_repo(self, repo_id: str, files: Dict[str, bytes], revision: str = "main") -> str:
        """Adds a commit holding `files` to `repo_id` and points `revision` at it; returns the commit."""
        digest = hashlib.sha1(repo_id.encode())
        for name in sorted(files):
            digest.update(name.encode() + hashlib.sha256(files[name]).digest())
        commit = digest.hexdigest()
        repo = self.repos.setdefault(repo_id, {"refs": {}, "commits": {}})
        repo["commits"][commit] = dict(files)
        repo["refs"][revision] = commit
        return commit

    def add_file(self, path: str, data: bytes) -> str:
        """Serves `data` at `path`; returns its address."""
        self.files[path] = data
        return self.url + path

    def requested(self, method: str, contains: str = "") -> List[Tuple[str, str, Dict[str, str]]]:
        return [r for r in self.requests if r[0] == method and contains in r[1]]

    # --- life -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "ReleaseServer":
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)

    def __enter__(self) -> "ReleaseServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _etag(data: bytes) -> str:
    return '"' + hashlib.sha256(data).hexdigest() + '"'


class _Handler(http.server.BaseHTTPRequestHandler):
    server_owner: ReleaseServer

    def log_message(self, *args):  # Quiet: the tests read `requests`.
        pass

    def do_HEAD(self):  # noqa: N802
        self._respond(body=False)

    def do_GET(self):  # noqa: N802
        self._respond(body=True)

    def _respond(self, body: bool) -> None:
        owner = self.server_owner
        path = urlsplit(self.path).path
        owner.requests.append((self.command, path, dict(self.headers.items())))
        parts = path.strip("/").split("/")
        if len(parts) >= 5 and parts[2] == "resolve":
            self._hub(f"{parts[0]}/{parts[1]}", unquote(parts[3]), "/".join(parts[4:]), body)
        elif path in owner.files:
            self._file(owner.files[path], body, owner.cut_after.get(path), {})
        else:
            self._status(404, {})

    def _hub(self, repo_id: str, revision: str, filename: str, body: bool) -> None:
        repo = self.server_owner.repos.get(repo_id)
        if repo is None:
            return self._status(404, {"X-Error-Code": "RepoNotFound",
                                      "X-Error-Message": "Repository not found"})
        commit = repo["refs"].get(revision, revision if revision in repo["commits"] else None)
        if commit is None:
            return self._status(404, {"X-Error-Code": "RevisionNotFound",
                                      "X-Error-Message": "Invalid rev id"})
        files = repo["commits"][commit]
        if filename not in files:
            return self._status(404, {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found",
                                      "X-Repo-Commit": commit})
        self._file(files[filename], body, None, {"X-Repo-Commit": commit})

    def _file(self, data: bytes, body: bool, cut_after: Optional[int], headers: Dict[str, str]) -> None:
        etag = _etag(data)
        start = 0
        requested = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if requested and requested.startswith("bytes=") and (if_range is None or if_range == etag):
            start = int(requested[len("bytes="):].split("-")[0])
            if start >= len(data):
                return self._status(416, {"Content-Range": f"bytes */{len(data)}"})
        content = data[start:]
        self.send_response(206 if start else 200)
        headers = {**headers, "ETag": etag, "Accept-Ranges": "bytes", "Content-Length": str(len(content)),
                   "Content-Type": "application/octet-stream"}
        for key, value in headers.items():
            self.send_header(key, value)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if not body:
            return
        if cut_after is not None:
            self.wfile.write(content[:cut_after])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(content)

    def _status(self, code: int, headers: Dict[str, str]) -> None:
        self.send_response(code)
        for key, value in {**headers, "Content-Length": "0"}.items():
            self.send_header(key, value)
        self.end_headers()


def use_local_hub(monkeypatch, url: str, cache_root) -> None:
    """Points huggingface_hub and tapas-tf at the server `url`, with every cache under `cache_root`,
    online, without a token and without progress bars."""
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache_root / "hf_cache"))
    monkeypatch.setenv("TAPAS_TF_CACHE", str(cache_root / "tapas_cache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
