"""Streaming reader of MediaWiki `pages-articles` XML dumps (`.xml`, `.xml.bz2`, multistream).

A dump is read in chunks through an lxml pull parser, and every `<page>` element is cleared once
it has become a `Page`, so memory stays flat whatever the size of the file. Elements are matched
by local name, so any export schema version (0.10, 0.11, ...) is read.

bz2 streams are decompressed one after another (a multistream dump is many bz2 streams laid end to
end), which also tells where damage is: the byte at which the broken stream starts. A multistream
dump can be read by byte range (`iter_pages(path, start, end)`), with the stream offsets of its
index file (`stream_offsets`, `stream_ranges`). Each stream of such a dump holds about 100 `<page>`
elements with no `<mediawiki>` root around them (the first stream holds the header, the last the
closing tag): a range is read inside a synthetic root, added only where the range lacks the real one.

Each Page carries the article base of its wiki (`Page.wiki_base`, `http://de.wikipedia.org/wiki/` for
a German dump), read from the dump's `<siteinfo>` and root `xml:lang` (`wiki_urls.site_base`); a
byte range without the header reads it from the file's first stream (`read_wiki_base`).

Nothing is raised for bad content: `iter_pages` yields `Page`s and `DumpError`s. A damaged file
(truncated or corrupt bz2, broken XML) yields every page read before the damage, then one fatal
`DumpError` naming the file and the position; a `<page>` that is well-formed XML but lacks a title
or an integer id yields a non-fatal `DumpError` and reading goes on.
"""

import bz2
import dataclasses
from typing import BinaryIO, Callable, Iterator, List, Optional, Tuple, Union

from lxml import etree

from tapas_tf.wikipedia.wiki_urls import WIKI_BASE, site_base

CHUNK_BYTES = 1 << 18
BZ2_MAGIC = b"BZh"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# `read_wiki_base` gives up past this much XML without a `<siteinfo>` (the header is a few kB).
SITEINFO_MAX_BYTES = 1 << 20

REASONS = ("unreadable_file", "truncated_bz2", "damaged_bz2", "broken_xml", "bad_page", "bad_index",
           "bad_range")


@dataclasses.dataclass(frozen=True)
class Page:
    """One `<page>` of a dump, with the text of its (last) revision and its wiki's article base."""

    title: str
    namespace: int
    page_id: int
    revision_id: Optional[int]
    redirect: Optional[str]
    wikitext: str
    wiki_base: str = WIKI_BASE


class DumpError(ValueError):
    """A problem of a dump file; `reason` is one of `REASONS`.

    Attributes:
      path: the file.
      position: the byte of the file (compressed) where the bz2 stream holding the damage starts,
        or where reading started for a plain file; None when unknown.
      fatal: True when reading of the file (or range) stopped here.
    """

    def __init__(self, reason: str, message: str, path: str, position: Optional[int] = None,
                 fatal: bool = True):
        super().__init__(message)
        self.reason = reason
        self.path = path
        self.position = position
        self.fatal = fatal

    def __reduce__(self):
        # Why: Beam pickles elements; the default reduce would call __init__ with the message only.
        return DumpError, (self.reason, str(self), self.path, self.position, self.fatal)


class _Cursor:
    """Where reading is, for error messages: the current bz2 stream and the last page read."""

    def __init__(self, path: str, start: int):
        self.path = path
        self.stream_start = start
        self.compressed = False
        self.last_page: Optional[Page] = None
        self.wiki_base = WIKI_BASE

    def error(self, reason: str, detail: str, fatal: bool = True) -> DumpError:
        if self.compressed:
            where = f"bz2 stream at byte {self.stream_start}: "
        else:
            where = f"range from byte {self.stream_start}: " if self.stream_start else ""
        page = self.last_page
        after = f" (after page {page.title!r}, id {page.page_id})" if page else " (before any page)"
        message = f"{self.path}: {where}{detail}{after}"
        return DumpError(reason, message, self.path, self.stream_start, fatal)


def _open_local(path: str) -> BinaryIO:
    return open(path, "rb")


def _raw_chunks(path: str, start: int, end: Optional[int], opener: Callable[[str], BinaryIO] = _open_local
                ) -> Iterator[bytes]:
    with opener(path) as f:
        f.seek(start)
        remaining = None if end is None else end - start
        while remaining is None or remaining > 0:
            size = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
            chunk = f.read(size)
            if not chunk:
                return
            if remaining is not None:
                remaining -= len(chunk)
            yield chunk


def _bz2_chunks(raw: Iterator[bytes], first: bytes, cursor: _Cursor) -> Iterator[bytes]:
    """The decompressed bytes of consecutive bz2 streams, `CHUNK_BYTES` at most at a time.

    Raises DumpError on damage.
    """
    cursor.compressed = True
    decompressor, fed, offset = bz2.BZ2Decompressor(), False, cursor.stream_start
    for chunk in _prepend(first, raw):
        data, data_start = chunk, offset
        offset += len(chunk)
        while True:
            if decompressor.eof:
                if not data:
                    break
                cursor.stream_start = data_start  # The previous stream ended: a new one starts here.
                decompressor = bz2.BZ2Decompressor()
            elif not data and decompressor.needs_input:
                break
            try:
                # Why max_length: one compressed chunk can hold many megabytes of text.
                out = decompressor.decompress(data, CHUNK_BYTES)
            except (OSError, ValueError) as e:
                raise cursor.error("damaged_bz2", f"corrupt bz2 data ({e})") from None
            fed, data = True, b""
            if out:
                yield out
            if decompressor.eof:
                data = decompressor.unused_data
                data_start = offset - len(data)
    if fed and not decompressor.eof:
        raise cursor.error("truncated_bz2", f"the data ends at byte {offset}, inside the bz2 stream")


def _starts_with_bz2(path: str, opener: Callable[[str], BinaryIO] = _open_local) -> bool:
    with opener(path) as f:
        return f.read(len(BZ2_MAGIC)) == BZ2_MAGIC


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _local(tag) -> str:
    """`{http://www.mediawiki.org/xml/export-0.11/}page` -> `page`."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _child_text(element, name: str) -> Optional[str]:
    for child in element:
        if _local(child.tag) == name:
            return child.text or ""
    return None


def _to_int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _page(element, cursor: _Cursor) -> Union[Page, DumpError]:
    """The Page of a `<page>` element, or a non-fatal DumpError when a field is missing or bad."""
    title = (_child_text(element, "title") or "").strip()
    namespace, page_id = _to_int(_child_text(element, "ns")), _to_int(_child_text(element, "id"))
    redirect, revision = None, None
    for child in element:
        name = _local(child.tag)
        if name == "redirect":
            redirect = child.get("title", "")
        elif name == "revision":
            revision = child  # pages-articles has one; of several, the last is the newest.
    if not title or namespace is None or page_id is None:
        found = f"title={title!r}, ns={_child_text(element, 'ns')!r}, id={_child_text(element, 'id')!r}"
        return cursor.error("bad_page", f"a <page> lacks a title or an integer ns or id ({found})",
                            fatal=False)
    revision_id = _to_int(_child_text(revision, "id")) if revision is not None else None
    wikitext = (_child_text(revision, "text") or "") if revision is not None else ""
    return Page(title, namespace, page_id, revision_id, redirect, wikitext, cursor.wiki_base)


class _PageParser:
    """Feeds XML bytes to a pull parser and returns the pages completed so far."""

    def __init__(self, cursor: _Cursor):
        self.cursor = cursor
        self.depth = 0
        self.lang = ""
        self.site_read = False
        self.parser = etree.XMLPullParser(events=("start", "end"), huge_tree=True, resolve_entities=False,
                                          no_network=True, load_dtd=False)

    def feed(self, data: bytes) -> List[Union[Page, DumpError]]:
        try:
            self.parser.feed(data)
        except etree.XMLSyntaxError as e:
            return self._events() + [self.cursor.error("broken_xml", f"broken XML ({e})")]
        return self._events()

    def close(self) -> List[Union[Page, DumpError]]:
        try:
            self.parser.close()
        except etree.XMLSyntaxError as e:
            return self._events() + [self.cursor.error("broken_xml", f"the XML ends early ({e})")]
        return self._events()

    def _events(self) -> List[Union[Page, DumpError]]:
        found: List[Union[Page, DumpError]] = []
        for event, element in self.parser.read_events():
            if event == "start":
                self.depth += 1
                if self.depth == 1 and _local(element.tag) != "mediawiki":
                    root = _local(element.tag)
                    found.append(self.cursor.error("broken_xml", f"the root <{root}> is not <mediawiki>"))
                    return found
                if self.depth == 1 and element.get(XML_LANG):
                    # A range's synthetic root has none: the base read from the file's header stays.
                    self.lang = element.get(XML_LANG)
                    self.cursor.wiki_base = site_base(lang=self.lang)
                continue
            self.depth -= 1
            if self.depth != 1:
                continue
            if _local(element.tag) == "siteinfo":
                self.cursor.wiki_base = site_base(_child_text(element, "base") or "",
                                                  _child_text(element, "dbname") or "", self.lang)
                self.site_read = True
            elif _local(element.tag) == "page":
                item = _page(element, self.cursor)
                if isinstance(item, Page):
                    self.cursor.last_page = item
                found.append(item)
            # Why: without this the tree under the root keeps every page read (memory grows with the file).
            element.clear(keep_tail=False)
            parent = element.getparent()
            while parent is not None and element.getprevious() is not None:
                del parent[0]
        return found


def iter_pages(path: str, start: Optional[int] = None, end: Optional[int] = None,
               opener: Callable[[str], BinaryIO] = _open_local) -> Iterator[Union[Page, DumpError]]:
    """Pages of the dump at `path` (plain XML or bz2, by its first bytes), in file order.

    Args:
      path: a `pages-articles` dump, `.xml` or `.xml.bz2` (single or multistream).
      start, end: read only bytes `[start, end)` of the file: for a multistream dump, `start` is a
        stream offset from its index and `end` the offset of a later stream, or None for the end of
        the file. The bytes may hold the dump's header or its closing tag, or neither.
      opener: opens `path` for binary reading, seekable (default the local file system; the Beam
        job passes its FileSystems, so that `gs://` dumps are read the same way).

    Yields:
      `Page`s, and `DumpError`s: non-fatal ones for single bad pages, and, for a damaged file, one
      fatal error last, after every page read before the damage.
    """
    range_mode = start is not None or end is not None
    cursor = _Cursor(path, start or 0)
    parser = _PageParser(cursor)
    if start:
        # The header (and <siteinfo>) is in the file's first stream, outside this range.
        cursor.wiki_base = read_wiki_base(path, opener)
    try:
        for data in _xml_bytes(path, start or 0, end, range_mode, cursor, opener):
            items = parser.feed(data)
            yield from items
            if items and isinstance(items[-1], DumpError) and items[-1].fatal:
                return
    except DumpError as e:
        yield e
        return
    if range_mode and parser.depth == 1:
        # The range ended between pages, before the dump's closing tag: close the root it opened.
        items = parser.feed(b"</mediawiki>")
        yield from items
        if items and isinstance(items[-1], DumpError):
            return
    yield from parser.close()


def read_wiki_base(path: str, opener: Callable[[str], BinaryIO] = _open_local) -> str:
    """The article base of the dump at `path`, from the `<siteinfo>` at its start (English
    Wikipedia's when the dump has none or cannot be read there: its pages then fail on their own)."""
    cursor = _Cursor(path, 0)
    parser = _PageParser(cursor)
    read, chunks = 0, _xml_bytes(path, 0, None, False, cursor, opener)
    try:
        for data in chunks:
            items = parser.feed(data)
            read += len(data)
            if parser.site_read or items or read > SITEINFO_MAX_BYTES:
                break
    except DumpError:
        pass
    finally:
        chunks.close()  # Closes the file now, not when the generator is collected.
    return cursor.wiki_base


def _xml_bytes(path: str, start: int, end: Optional[int], range_mode: bool, cursor: _Cursor,
               opener: Callable[[str], BinaryIO] = _open_local) -> Iterator[bytes]:
    """The XML bytes of the file (decompressed when it starts as bz2), a root added to a range that
    lacks one. Raises DumpError for a file that cannot be read or bz2 damage."""
    try:
        raw = _raw_chunks(path, start, end, opener)
        first = next(raw, b"")
        if start and first and not first.startswith(BZ2_MAGIC) and _starts_with_bz2(path, opener):
            raise cursor.error("bad_range", f"byte {start} of a bz2 file is not the start of a bz2 stream")
        chunks = _bz2_chunks(raw, first, cursor) if first.startswith(BZ2_MAGIC) else _prepend(first, raw)
        opened = not range_mode
        for data in chunks:
            if not opened:
                head = data.lstrip()
                if not head:
                    continue
                opened = True
                if not head.startswith((b"<?xml", b"<mediawiki")):
                    data = b"<mediawiki>" + data  # A range of page streams: give them a root.
            yield data
        if not opened:
            yield b"<mediawiki>"  # An empty range.
    except OSError as e:
        raise cursor.error("unreadable_file", f"cannot read the file ({e.strerror or e})") from None


def stream_offsets(index_path: str) -> List[int]:
    """The sorted, unique stream offsets of a multistream index (`offset:page_id:title` lines).

    The index may be bz2-compressed (as Wikipedia ships it) or plain. Raises DumpError
    (`bad_index`, naming the line) for a line that does not start with an integer offset, and
    (`unreadable_file`) for a file that cannot be read.
    """
    offsets = set()
    try:
        with open(index_path, "rb") as probe:
            compressed = probe.read(3) == BZ2_MAGIC
        opener = bz2.open if compressed else open
        with opener(index_path, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                offset = _to_int(line.split(":", 1)[0]) if ":" in line else None
                if offset is None or offset < 0:
                    raise DumpError("bad_index", f"{index_path}:{number}: not an 'offset:page_id:title' "
                                    f"line: {line.strip()[:80]!r}", index_path)
                offsets.add(offset)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DumpError("unreadable_file", f"{index_path}: cannot read the index ({e})", index_path) from None
    return sorted(offsets)


def stream_ranges(offsets: List[int], streams_per_range: int = 1) -> List[Tuple[int, Optional[int]]]:
    """Byte ranges `(start, end)` covering the streams of `offsets`, `streams_per_range` at a time.

    The last range runs to the end of the file (`end` None), so the closing stream is read too.
    """
    if streams_per_range < 1:
        raise ValueError(f"streams_per_range must be at least 1, got {streams_per_range}")
    starts = offsets[::streams_per_range]
    return [(begin, starts[i + 1] if i + 1 < len(starts) else None) for i, begin in enumerate(starts)]
