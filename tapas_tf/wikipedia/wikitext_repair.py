"""Wikitext mended before it is parsed, so that no table is lost without being counted.

mwparserfromhell reads a `{|` that is never closed, or a `{{` that is never closed, as plain
text: the table or infobox, and every table nested in it, would vanish from the page without a
trace. `repair` mends the text first, the way MediaWiki reads it where MediaWiki has a rule:

- a wikitable opened with `{|` and never closed is closed at the end of the page, as MediaWiki
  does (so the rest of the page is in its last cell, as the reader sees it); a `{{end}}` line
  closes a table (the template renders `|}`); an indented table (`:{|`, which MediaWiki shows
  and mwparserfromhell does not read) loses its colons;
- an infobox template opened with `{{Infobox` and never closed (its own `}}` deleted, or taken
  by a nested template that lost its own) is closed after its last parameter line: the first
  line after it that cannot belong to a template argument (prose, a heading, a table) ends it.
  MediaWiki has no such rule (it shows the template as raw text), but the parameters written
  there are the infobox's facts, and recovering them is what a parser can do.

Both leave a comment in the mended markup (`TABLE_MARK`, `INFOBOX_MARK`), so that `repairs_of`
tells which parsed tables and templates were mended, and the Beam job counts them. `markup_counts`
counts the wikitables and infoboxes written in the text, for the caller to count those the
parser still did not read. Comments and the contents of `<ref>`, `<nowiki>`, `<pre>`, `<math>`
and the other tags whose contents are not wikitext are left out of all of this (`mask`).
"""

import dataclasses
import re
from typing import Dict, Iterator, List, Optional, Tuple

from mwparserfromhell.definitions import PARSER_BLACKLIST
from mwparserfromhell.nodes import Tag, Template

TABLE_MARK = "<!--tapas_tf:autoclosed-->"
INFOBOX_MARK = "<!--tapas_tf:infobox_recovered-->"

# `<ref>`: its contents are rendered in the reference list, not in place, and not searched for tables.
_UNPARSED_TAGS = "|".join(sorted(set(PARSER_BLACKLIST) | {"ref"}))
# An unclosed comment hides the rest of the page (MediaWiki); an unclosed tag is shown as text.
_MASKED = re.compile(r"<!--.*?(?:-->|\Z)|<(" + _UNPARSED_TAGS + r")\b[^>]*?(?<!/)>.*?</\1\s*>",
                     re.DOTALL | re.IGNORECASE)
# What starts the lines `close_tables` reads, as MediaWiki does: an opener (`{|`, after colons that
# indent the table), a closer (`|}`), an `{{end}}`. Found anywhere, then kept at a line's start only.
# Why no `^`, no IGNORECASE, no lookbehind in these patterns: each makes the search try every
# character of the page, and this runs on every page (first letters of names are either case).
_TABLE_MARKUP = re.compile(r"\{\||\|\}|\{\{[ \t]*(?:[Tt]emplate[ \t]*:[ \t]*)?[Ee]nd[ \t]*\}\}")
_NOT_NEWLINE = re.compile(r"[^\n]")
_CLASS = re.compile(r"\bclass\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s\"'>]+)", re.IGNORECASE)
_HTML_TABLE = re.compile(r"<table\b[^>]*>", re.IGNORECASE)
_INFOBOX_OPEN = re.compile(r"\{\{\s*(?:[Tt]emplate\s*:\s*)?[Ii]nfobox")
_BRACES_OR_LINE = re.compile(r"\{{2,}|\}{2,}|\n")
# Lines that can continue a template argument: parameters, closers, lists, templates, tags.
_CONTINUES = ("|", "}", "*", "#", ":", "{{", "<")
_ENDS_TABLE_ROW = ("|}", "|-", "|+")


@dataclasses.dataclass(frozen=True)
class Repaired:
    """The mended text; what was mended (tables closed at the end, infoboxes recovered); and
    `written`, the `markup_counts` of the text as it was."""

    text: str
    tables_closed: int = 0
    infoboxes_recovered: int = 0
    written: Dict[str, int] = dataclasses.field(default_factory=lambda: {"wikitable": 0, "infobox": 0})

    @property
    def changed(self) -> bool:
        return bool(self.tables_closed or self.infoboxes_recovered)


def _blank(found: re.Match) -> str:
    text = found.group()
    return _NOT_NEWLINE.sub(" ", text) if "\n" in text else " " * len(text)


def mask(text: str) -> str:
    """`text` with comments and unparsed tags' contents blanked, newlines kept (same length)."""
    return _MASKED.sub(_blank, text) if "<" in text else text


@dataclasses.dataclass(frozen=True)
class _TableLine:
    kind: str  # "open", "close" or "end" ({{end}}, the whole line).
    start: int  # Of the line ("end"), or of the indenting colons ("open").
    end: int  # Of the line ("end"), or of the colons ("open").
    attributes: str = ""


def _table_lines(masked: str) -> Iterator[_TableLine]:
    for found in _TABLE_MARKUP.finditer(masked):
        line_start = masked.rfind("\n", 0, found.start()) + 1
        prefix = masked[line_start:found.start()]
        markup = found.group()
        if markup == "{|" and not prefix.strip(" \t:"):
            colons = line_start + len(prefix) - len(prefix.lstrip(" \t"))
            line_end = masked.find("\n", found.end())
            yield _TableLine("open", colons, colons + len(prefix.strip(" \t")),
                             masked[found.end(): line_end if line_end >= 0 else len(masked)])
        elif markup == "|}" and not prefix.strip(" \t"):
            yield _TableLine("close", line_start, found.end())
        elif markup.startswith("{{") and not prefix.strip(" \t"):
            line_end = masked.find("\n", found.end())
            line_end = line_end if line_end >= 0 else len(masked)
            if not masked[found.end():line_end].strip(" \t"):
                yield _TableLine("end", line_start, line_end)


def _is_wikitable_opener(attributes: str) -> bool:
    found = _CLASS.search(attributes)
    return bool(found) and "wikitable" in found.group(1).strip("\"'").split()


def infobox_openers(masked: str) -> List[int]:
    """Where the masked text opens an infobox template (`{{Infobox ...`, not `{{{Infobox`)."""
    return [found.start() for found in _INFOBOX_OPEN.finditer(masked)
            if not (found.start() and masked[found.start() - 1] == "{")]


def markup_counts(masked: str, openers: Optional[List[int]] = None) -> Dict[str, int]:
    """How many wikitables (`{|` lines and `<table>` tags with the class) and infoboxes
    (`{{Infobox ...`; `openers`, when the caller has them) the masked text opens."""
    wikitables = sum(1 for line in _table_lines(masked)
                     if line.kind == "open" and _is_wikitable_opener(line.attributes))
    if "<" in masked:
        wikitables += sum(1 for tag in _HTML_TABLE.finditer(masked) if _is_wikitable_opener(tag.group()))
    openers = openers if openers is not None else infobox_openers(masked)
    return {"wikitable": wikitables, "infobox": len(openers)}


def close_tables(text: str, masked: str) -> Tuple[str, int]:
    """`text` with its unclosed `{|` tables closed at the end (MediaWiki's rule), `{{end}}` lines
    that close a table written as `|}`, and indented openers without their colons; and how many
    tables were closed at the end."""
    edits: List[Tuple[int, int, str]] = []  # (start, end, replacement) in `text`, in order.
    depth = 0
    for line in _table_lines(masked):
        if line.kind == "open":
            depth += 1
            if line.end > line.start:  # `:{|`: the colons only indent the table.
                edits.append((line.start, line.end, ""))
        elif depth:
            if line.kind == "end":
                edits.append((line.start, line.end, "|}"))  # {{end}} renders `|}`.
            depth -= 1
    if not depth and not edits:
        return text, 0
    parts, last = [], 0
    for start, end, replacement in edits:
        parts += [text[last:start], replacement]
        last = end
    closers = "\n" + TABLE_MARK + "\n|}" * depth if depth else ""
    return "".join(parts) + text[last:] + closers, depth


def _continues(line: str) -> bool:
    stripped = line.strip()
    return not stripped or (stripped.startswith(_CONTINUES) and not stripped.startswith(_ENDS_TABLE_ROW))


def _depths(masked: str, start: int) -> Iterator[Tuple[re.Match, int]]:
    """Brace runs and line breaks from `start` on, with the number of templates open after each.

    `{{{`...`}}}` (a template argument, seen in pasted template code) opens no template."""
    depth, arguments = 0, 0
    for token in _BRACES_OR_LINE.finditer(masked, start):
        run = token.group()
        if run != "\n":
            count = len(run)
            if count % 2 and (run[0] == "{" or arguments):
                arguments += 1 if run[0] == "{" else -1
                count -= 3
            depth += count // 2 if run[0] == "{" else -(count // 2)
        yield token, depth


def _unclosed_end(masked: str, start: int) -> Optional[Tuple[int, int]]:
    """For a template opened at `start` and never closed: where its arguments end, and how many
    templates are open there; None when it is closed."""
    if any(depth <= 0 for token, depth in _depths(masked, start) if token.group() != "\n"):
        return None
    depth = 1
    for token, depth in _depths(masked, start):
        if token.group() == "\n":
            line_end = masked.find("\n", token.end())
            if not _continues(masked[token.end(): line_end if line_end >= 0 else len(masked)]):
                return len(masked[: token.start()].rstrip()), depth
    return len(masked.rstrip()), depth


def recover_infoboxes(text: str, masked: str, openers: Optional[List[int]] = None) -> Tuple[str, int]:
    """`text` with each never-closed infobox template closed after its last parameter line, and
    how many were. `openers`: `infobox_openers(masked)`, when the caller has them."""
    insertions: List[Tuple[int, int]] = []
    block_end = -1
    for opener in openers if openers is not None else infobox_openers(masked):
        if opener < block_end:
            continue  # Inside an infobox recovered here: closed with it.
        found = _unclosed_end(masked, opener)
        if found is not None:
            insertions.append(found)
            block_end = found[0]
    for position, depth in reversed(insertions):
        text = text[:position] + INFOBOX_MARK + "}}" * depth + text[position:]
    return text, len(insertions)


def repair(text: str) -> Repaired:
    """The page's wikitext mended as the module docstring says."""
    masked = mask(text)
    openers = infobox_openers(masked)
    written = markup_counts(masked, openers)
    text, recovered = recover_infoboxes(text, masked, openers)
    if recovered:
        masked = mask(text)
    text, closed = close_tables(text, masked)
    return Repaired(text, closed, recovered, written)


def repairs_of(node) -> Tuple[str, ...]:
    """The repairs (`pretrain_interactions.REPAIRS`) of a parsed wikitable or infobox: "autoclosed"
    when `close_tables` closed it, "infobox_recovered" when `recover_infoboxes` did."""
    source = str(node)
    if isinstance(node, Tag):
        while source.endswith("\n|}"):
            source = source[:-3]
        return ("autoclosed",) if source.endswith(TABLE_MARK) else ()
    if isinstance(node, Template):
        return ("infobox_recovered",) if source.rstrip("}").endswith(INFOBOX_MARK) else ()
    return ()
