"""Resumable HTTP(S) downloads with a SHA-256 check, for the release zips of the original TAPAS.

    digest = download_file(url, "cache/release.zip", expected_sha256=None)

The bytes go to `TARGET.part`. A `.part` left by an interrupted download is continued with an HTTP
Range request (with `If-Range` and the ETag or Last-Modified date the server first gave, so that a
file changed on the server starts over instead of being spliced); a server that ignores the range
(200) starts the file over. The file becomes TARGET only when it is complete and, when the caller
gives `expected_sha256`, its digest matches; a mismatch deletes it. The digest is returned in
every case, so the caller can record it.

Every failure is a `DownloadError` (a ValueError) with a one-line message that names the address.
"""

import hashlib
import json
import os
import sys
from typing import Dict, Optional, Tuple

import requests
import urllib3

CHUNK_BYTES = 1 << 20
TIMEOUT = (10, 60)  # Seconds to connect, and between two reads.
PART_SUFFIX = ".part"
VALIDATOR_SUFFIX = ".part.json"  # The validator of the resource the .part holds the start of.
SHA256_HEX_LENGTH = 64


class DownloadError(ValueError):
    """A download failed; the message is one line and names the address."""


def sha256_of_file(path: str) -> str:
    """The SHA-256 of a file, in lower-case hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256_hex(value: str) -> str:
    """`value` in lower case if it is 64 hex digits; DownloadError otherwise."""
    value = value.strip().lower()
    if len(value) != SHA256_HEX_LENGTH or any(c not in "0123456789abcdef" for c in value):
        raise DownloadError(f"sha256={value!r} is not a SHA-256 digest (64 hex digits)")
    return value


def download_file(url: str, target: str, expected_sha256: Optional[str] = None,
                  session: Optional[requests.Session] = None) -> str:
    """Downloads `url` to `target` (resuming `target.part`), checks its digest, returns it.

    Args:
      url: an http or https address.
      target: the file to write; its directory is created.
      expected_sha256: the digest the file must have (hex), or None to only compute it.
      session: a requests session (default a new one).

    Raises:
      DownloadError: an HTTP error status, a connection that failed or closed early (the `.part`
        is kept, so the next call resumes), or a digest mismatch (the file is deleted).
    """
    expected = check_sha256_hex(expected_sha256) if expected_sha256 else None
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    part = target + PART_SUFFIX
    session = session or requests.Session()
    _fetch_to_part(session, url, part)
    digest = sha256_of_file(part)
    if expected and digest != expected:
        _remove(part, target + VALIDATOR_SUFFIX)
        raise DownloadError(f"{url}: SHA-256 mismatch, expected {expected} but the download has {digest}; "
                            "the download was deleted")
    os.replace(part, target)
    _remove(target + VALIDATOR_SUFFIX)
    return digest


def _fetch_to_part(session: requests.Session, url: str, part: str, retried: bool = False) -> None:
    """Completes `part` from `url`, continuing what it already holds."""
    validator_path = part[: -len(PART_SUFFIX)] + VALIDATOR_SUFFIX
    offset = os.path.getsize(part) if os.path.exists(part) else 0
    headers = _range_headers(offset, _read_validator(validator_path))
    total: Optional[int] = None
    try:
        with session.get(url, headers=headers, stream=True, timeout=TIMEOUT) as response:
            if response.status_code == 416 and offset and not retried:
                complete = _range_total(response.headers.get("Content-Range")) == offset
                if complete:
                    return
                _remove(part, validator_path)  # The .part is longer than the file: start over.
                return _fetch_to_part(session, url, part, retried=True)
            if response.status_code not in (200, 206):
                raise DownloadError(f"{url}: HTTP {response.status_code} {response.reason or ''}".rstrip())
            start, total = _response_span(response, offset)
            if start == 0:
                _write_validator(validator_path, response.headers)
            _write_body(response, part, start, total, os.path.basename(part[: -len(PART_SUFFIX)]))
    except (requests.RequestException, urllib3.exceptions.HTTPError) as e:
        held = os.path.getsize(part) if os.path.exists(part) else 0
        of_total = f" of {total:,}" if total else ""
        raise DownloadError(f"{url}: the download stopped at {held:,}{of_total} bytes ({_reason(e)}); "
                            "run again to resume it") from None
    held = os.path.getsize(part)
    if total is not None and held != total:
        raise DownloadError(f"{url}: the server sent {held:,} of {total:,} bytes; run again to resume it")


def _range_headers(offset: int, validator: Optional[str]) -> Dict[str, str]:
    headers = {"Accept-Encoding": "identity"}  # The bytes of the file, so that ranges and sizes agree.
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    return headers


def _response_span(response: requests.Response, offset: int) -> Tuple[int, Optional[int]]:
    """(where the body starts in the file, the file's total size or None)."""
    length = response.headers.get("Content-Length")
    if response.status_code == 206:
        start = _range_start(response.headers.get("Content-Range"))
        if start != offset:
            raise DownloadError(f"{response.url}: asked for bytes from {offset:,} but the server sent "
                                f"{response.headers.get('Content-Range')!r}")
        total = _range_total(response.headers.get("Content-Range"))
        return start, total if total is not None else (offset + int(length) if length else None)
    return 0, int(length) if length else None


def _write_body(response: requests.Response, part: str, start: int, total: Optional[int], label: str) -> None:
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel

    raw = response.raw
    # read1 returns what has arrived (urllib3 2): bytes received before a connection breaks are kept.
    read = getattr(raw, "read1", None) or raw.read
    bar = tqdm(total=total, initial=start, unit="B", unit_scale=True, desc=label, disable=None,
               file=sys.stderr)
    with open(part, "ab" if start else "wb") as f, bar:
        while True:
            chunk = read(CHUNK_BYTES, decode_content=True)
            if not chunk:
                break
            f.write(chunk)
            f.flush()
            bar.update(len(chunk))


def _range_start(content_range: Optional[str]) -> Optional[int]:
    """`bytes 100-199/200` -> 100."""
    try:
        return int(content_range.split()[1].split("-")[0])
    except (AttributeError, IndexError, ValueError):
        return None


def _range_total(content_range: Optional[str]) -> Optional[int]:
    """`bytes 100-199/200` or `bytes */200` -> 200."""
    try:
        return int(content_range.rsplit("/", 1)[1])
    except (AttributeError, IndexError, ValueError):
        return None


def _read_validator(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f).get("validator")
    except (OSError, ValueError, AttributeError):
        return None


def _write_validator(path: str, headers) -> None:
    """Records the ETag (a strong one) or Last-Modified date of a response that starts the file."""
    etag = headers.get("ETag")
    validator = etag if etag and not etag.startswith("W/") else headers.get("Last-Modified")
    if validator:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"validator": validator}, f)
    else:
        _remove(path)


def _reason(error: Exception) -> str:
    """A few words for a requests or urllib3 error (their messages run to lines of connection detail)."""
    if isinstance(error, (requests.Timeout, urllib3.exceptions.TimeoutError)):
        return "timed out"
    if isinstance(error, (requests.exceptions.ChunkedEncodingError, urllib3.exceptions.ProtocolError)):
        return "the connection closed early"
    if isinstance(error, requests.ConnectionError):
        return "the connection failed"
    return type(error).__name__


def _remove(*paths: str) -> None:
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
