"""Rendered Wikipedia pages on disk: `N.html` or `N.html.gz` with `N.json` beside it.

The WikiTableQuestions page crawl stores each article body as MediaWiki's `action=render` gives
it (no `<html>` or `<head>`), gzipped in `2xx-page/N.html.gz`, whose first line is a comment with
the crawl URL (quoted) and time:

    <!-- http%3A//en.wikipedia.org/wiki%3Faction%3Drender%26curid%3D2774936%26oldid%3D540758743 2014-... -->

and `N.json` holds `title`, `url`, `id` (page id), `revision`, `hashcode` and `tableIndex` (the
WTQ table's index among the page's wikitables). `read_page` reads both; `parse_page` does the same
from bytes a caller read itself (Beam's `fileio`). A file that cannot be used raises `PageError`
with a reason from `PAGE_ERROR_REASONS` and the file's path, which the Beam job counts.
"""

import dataclasses
import gzip
import json
import os
import urllib.parse
import zlib
from typing import Optional

PAGE_ERROR_REASONS = ("missing_file", "unreadable_file", "bad_gzip", "invalid_utf8", "bad_metadata")
# Where a page's title and ids came from (`HtmlPage.metadata_source`).
METADATA_SOURCES = ("json", "comment", "file_name")


class PageError(ValueError):
    """A page file that cannot be read; `reason` is one of `PAGE_ERROR_REASONS`, `path` names it."""

    def __init__(self, reason: str, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.reason = reason
        self.path = path


@dataclasses.dataclass(frozen=True)
class HtmlPage:
    """One rendered article and what is known about it.

    Attributes:
      title: the article title ("Shooting at the 1988 Summer Olympics").
      url: the crawl URL (`...wiki?action=render&curid=2774936&oldid=540758743`), or "".
      page_id, revision: MediaWiki's page id and revision id, when known.
      html: the page's text, the crawl comment included.
      source_key: parent folder and file stem ("203-page/113"), the page's name in the crawl.
      wtq_table_index: the `tableIndex` of the `.json` (WTQ pages), else None.
      metadata_source: where the title came from, one of `METADATA_SOURCES`: "json" (the file
        beside the page); without one, "comment" (a `/wiki/Title` crawl URL in the first line) or
        "file_name" (the file stem, underscores read as spaces). Url, page id and revision then
        come from the comment's URL (`curid`, `oldid`).
    """

    title: str
    url: str
    page_id: Optional[int]
    revision: Optional[int]
    html: str
    source_key: str
    wtq_table_index: Optional[int] = None
    metadata_source: str = "json"


def _stem(name: str) -> str:
    for suffix in (".gz", ".html", ".htm"):
        name = name.removesuffix(suffix)
    return name


def source_key(path: str) -> str:
    """`.../203-page/113.html.gz` -> `203-page/113` (parent folder and file stem)."""
    folder = os.path.dirname(path) or os.getcwd()
    return f"{os.path.basename(folder.rstrip('/'))}/{_stem(os.path.basename(path))}"


def metadata_path(path: str) -> str:
    """The `.json` beside a page: `N.html.gz` and `N.html` -> `N.json`."""
    return os.path.join(os.path.dirname(path), _stem(os.path.basename(path)) + ".json")


def _decode(path: str, raw: bytes) -> str:
    if path.endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except EOFError as error:
            raise PageError("bad_gzip", path, f"the gzip data ends at byte {len(raw)} before its end marker "
                            "(the file is truncated)") from error
        except (OSError, zlib.error) as error:
            raise PageError("bad_gzip", path, f"not a valid gzip file ({error})") from error
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PageError("invalid_utf8", path, f"not UTF-8 at byte {error.start}") from error


def _metadata_from_json(json_path: str, raw: bytes) -> dict:
    try:
        metadata = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise PageError("bad_metadata", json_path, f"not a JSON object ({error})") from error
    if not isinstance(metadata, dict) or not isinstance(metadata.get("title"), str) or not metadata["title"]:
        raise PageError("bad_metadata", json_path, "no title")
    return metadata


def _metadata_from_comment(html: str, key: str) -> dict:
    """Title, url, id and revision from the crawl comment, the title from the file name if need be."""
    url = ""
    if html.startswith("<!--"):
        words = html[4:html.find("-->")].split()
        url = urllib.parse.unquote(words[0]) if words else ""
    parsed = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parsed.query)
    title, origin = "", "comment"
    if parsed.path.startswith("/wiki/"):
        title = parsed.path[len("/wiki/"):]
    if not title:
        title, origin = key.split("/", 1)[1], "file_name"
    return {"title": title.replace("_", " "), "url": url, "id": (query.get("curid") or [None])[0],
            "revision": (query.get("oldid") or [None])[0], "origin": origin}


def _optional_int(value) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_page(path: str, raw: bytes, metadata_raw: Optional[bytes]) -> HtmlPage:
    """A page from the bytes of its file (gzipped if `path` ends in `.gz`) and of its `.json`.

    Raises:
      PageError: not gzip, not UTF-8, or a `.json` that is not an object with a title.
    """
    html = _decode(path, raw)
    key = source_key(path)
    if metadata_raw is None:
        metadata = _metadata_from_comment(html, key)
        origin = metadata["origin"]
    else:
        metadata, origin = _metadata_from_json(metadata_path(path), metadata_raw), "json"
    return HtmlPage(title=metadata["title"], url=str(metadata.get("url") or ""),
                    page_id=_optional_int(metadata.get("id")),
                    revision=_optional_int(metadata.get("revision")), html=html, source_key=key,
                    wtq_table_index=_optional_int(metadata.get("tableIndex")), metadata_source=origin)


def _read(path: str, missing_reason: str) -> bytes:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except FileNotFoundError as error:
        raise PageError(missing_reason, path, "no such file") from error
    except OSError as error:
        raise PageError("unreadable_file", path, f"cannot be read ({error.strerror})") from error


def read_page(path: str) -> HtmlPage:
    """A page from `N.html` or `N.html.gz` and the `N.json` beside it, if there is one.

    Raises:
      PageError: a missing or unreadable page, not gzip, not UTF-8, or a bad `.json`.
    """
    raw = _read(path, "missing_file")
    json_path = metadata_path(path)
    metadata_raw = _read(json_path, "bad_metadata") if os.path.exists(json_path) else None
    return parse_page(path, raw, metadata_raw)
