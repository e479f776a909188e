"""The rules every extracted table follows, whatever markup it came from (paper, section 3).

An extractor (wikitext or HTML) reads a table as rows of `RawCell`s (text already plain, with
its header flag and spans); `to_table` then:

1. expands colspan and rowspan, copying a spanning cell's text into every position it covers, and
   pads short rows with empty cells; then drops the columns in which no cell starts, as a browser
   shows them (see `drop_unstarted_columns`);
2. drops leading title rows (one cell across the whole width, as "Medal table" above a header);
3. requires a header row: the first remaining row must be all header cells (`<th>`, `!`); the
   all-header rows right below it are merged into it, column by column ("Results" over "Score"
   gives "Results Score"), as a reader reads a two-row header;
4. drops body rows that are one cell across the whole width (section captions inside a table),
   rows with no text at all, rows whose only cells span the rows below them (a year written once
   above its entries: its text is copied into those rows, and the row itself has no height),
   and columns with no text below the header (image or colour-swatch columns), counting them;
5. refuses tables with more than `MAX_CELLS` cells, with no body row, or with one column.

A colspan wider than the table (a footnote with `colspan=12` under eight columns, a last cell with
`colspan="99999"`) therefore ends at the table's edge and does not widen it. A cell spanning more
than `MAX_SPAN` columns with cells after it in its row is refused (`span_too_large`): those
cells would stand in columns of their own, past the table, under no header.

An infobox is a list of (label, value) pairs and becomes one header row and one data row
(`infobox_table`). Refusals raise `TableRejected` with a reason from `REASONS`, which the Beam job
counts.
"""

import bisect
import dataclasses
from typing import List, Optional, Sequence, Tuple

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import make_table

MAX_CELLS = 500
# Wider than any real table: a colspan beyond this is markup for "to the end of the row".
MAX_SPAN = 100
# HTML's limit: browsers read a larger colspan as this.
HTML_MAX_COLSPAN = 1000

REASONS = ("no_header_row", "too_many_cells", "no_body_rows", "single_column", "empty_table",
           "span_too_large")


class TableRejected(ValueError):
    """A table that does not become a pre-training table; `reason` is one of `REASONS`."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class RawCell:
    """A cell as markup gives it: plain text, whether it is a header cell, and its spans."""

    text: str
    is_header: bool = False
    colspan: int = 1
    rowspan: int = 1


@dataclasses.dataclass
class GridStats:
    """Limits applied while building a table (for counters): narrowed spans, dropped rows."""

    spans_narrowed: int = 0
    title_rows_dropped: int = 0
    caption_rows_dropped: int = 0
    empty_rows_dropped: int = 0
    empty_columns_dropped: int = 0
    header_rows_merged: int = 0
    spanning_rows_dropped: int = 0


def expand_spans(rows: Sequence[Sequence[RawCell]]) -> List[List[RawCell]]:
    """The rectangular grid of `rows`, spans expanded, short rows padded with empty cells.

    The positions a cell covers hold one shared copy of it with span 1. A colspan is read as at
    most `HTML_MAX_COLSPAN`, and a rowspan reaching below the last row is cut at the table's end
    (as browsers render them).
    """
    return _place(rows)[0]


def _place(rows: Sequence[Sequence[RawCell]]) -> Tuple[List[List[RawCell]], List[List[int]]]:
    """`expand_spans`'s grid, and the column at which each cell of `rows` starts."""
    grid: List[List[Optional[RawCell]]] = []
    starts: List[List[int]] = []
    for row_index, row in enumerate(rows):
        while len(grid) <= row_index:
            grid.append([])
        column = 0
        starts.append([])
        for cell in row:
            while column < len(grid[row_index]) and grid[row_index][column] is not None:
                column += 1  # Skip positions filled by rowspans from above.
            starts[-1].append(column)
            width = min(max(cell.colspan, 1), HTML_MAX_COLSPAN)
            height = min(max(cell.rowspan, 1), len(rows) - row_index)
            copy = RawCell(cell.text, cell.is_header)
            for down in range(height):
                target = grid[row_index + down] if row_index + down < len(grid) else None
                if target is None:
                    grid.append([])
                    target = grid[row_index + down]
                while len(target) < column + width:
                    target.append(None)
                for across in range(width):
                    if target[column + across] is None:
                        target[column + across] = copy
            column += width
    width = max((len(row) for row in grid), default=0)
    return ([[cell if cell is not None else RawCell("") for cell in row] + [RawCell("")] * (width - len(row))
             for row in grid], starts)


def _check_spans(rows: Sequence[Sequence[RawCell]], table_id: str) -> None:
    """Refuses a span past `MAX_SPAN` that is not the last cell of its row (`span_too_large`).

    Why refuse rather than keep: the cells after it stand, in the rendered table, in columns of
    their own past the table's other rows, under no header; no table a reader sees has them
    where the markup seems to mean, and `no_header_row` would hide why."""
    for row_index, row in enumerate(rows):
        for cell_index, cell in enumerate(row[:-1]):
            if cell.colspan > MAX_SPAN:
                raise TableRejected("span_too_large", f"{table_id}: row {row_index + 1}: a cell spans "
                                    f"{cell.colspan} columns and {len(row) - 1 - cell_index} more "
                                    "cells follow it")


def drop_unstarted_columns(rows: Sequence[Sequence[RawCell]], stats: GridStats
                           ) -> Tuple[List[List[RawCell]], List[List[RawCell]]]:
    """The grid of `rows` without the columns in which no cell starts, and `rows` with each
    colspan cut to the columns kept.

    Why: a browser gives such a column no width (no cell of its own sits in it), so a colspan
    that reaches past the other rows (`colspan="99999"` for "to the end of the row", a footnote's
    `colspan=12` under eight columns) or that no other row splits shows as a cell ending at the
    table's edge, or as one column: the table MediaWiki shows is this one, and keeping it keeps
    its rows. Each cut colspan is counted in `stats.spans_narrowed`.
    """
    grid, starts = _place(rows)
    kept = sorted({column for row in starts for column in row})
    if len(kept) == (len(grid[0]) if grid else 0):
        return grid, [list(row) for row in rows]
    index = {column: position for position, column in enumerate(kept)}
    narrowed = []
    for row, row_starts in zip(rows, starts):
        narrowed.append([])
        for cell, start in zip(row, row_starts):
            end = start + min(max(cell.colspan, 1), HTML_MAX_COLSPAN)
            width = bisect.bisect_left(kept, end) - index[start]
            if width < cell.colspan:
                stats.spans_narrowed += 1
                cell = dataclasses.replace(cell, colspan=width)
            narrowed[-1].append(cell)
    return [[row[column] for column in kept] for row in grid], narrowed


def _drop_empty_columns(header: List[str], body: List[List[str]], stats: GridStats):
    # A column whose body is empty holds images or colour swatches, whatever its header says.
    keep = [c for c in range(len(header)) if any(row[c].strip() for row in body)]
    stats.empty_columns_dropped += len(header) - len(keep)
    return [header[c] for c in keep], [[row[c] for c in keep] for row in body]


def _only_spans_down(raw: Sequence[RawCell], width: int) -> bool:
    """A row whose own cells all span down and leave the rest of the row empty."""
    return bool(raw) and all(cell.rowspan > 1 for cell in raw) and sum(c.colspan for c in raw) < width


def _is_full_width_single(row: Sequence[RawCell], raw: Sequence[RawCell], width: int) -> bool:
    """A row made of one cell spanning the whole table (a title or caption row)."""
    return width > 1 and len(raw) == 1 and raw[0].colspan >= width


def to_table(rows: Sequence[Sequence[RawCell]], table_id: str, stats: Optional[GridStats] = None,
             max_cells: int = MAX_CELLS) -> interaction_pb2.Table:
    """The Table of a markup table, by the rules of the module docstring.

    Raises:
      TableRejected: no header row, too many cells, no body row, one column, no cells, or a
        span past `MAX_SPAN` with cells after it.
    """
    stats = stats if stats is not None else GridStats()
    _check_spans(rows, table_id)
    grid, rows = drop_unstarted_columns(rows, stats)
    if not grid or not grid[0]:
        raise TableRejected("empty_table", f"{table_id}: the table has no cells")
    width = len(grid[0])
    if width * len(grid) > max_cells * 4:
        # Refuse early: title and caption rows cannot bring a huge table under the limit.
        raise TableRejected("too_many_cells", f"{table_id}: {width * len(grid)} cells, at most {max_cells}")
    start = 0
    while start < len(grid) and _is_full_width_single(grid[start], rows[start], width):
        start += 1
        stats.title_rows_dropped += 1
    if start == len(grid) or not all(cell.is_header for cell in grid[start]):
        raise TableRejected("no_header_row", f"{table_id}: no row of header cells opens the table")
    header = [cell.text for cell in grid[start]]
    start += 1
    while start < len(grid) and all(cell.is_header for cell in grid[start]):
        header = [top if top == below.text else f"{top} {below.text}".strip()
                  for top, below in zip(header, grid[start])]
        stats.header_rows_merged += 1
        start += 1
    body = []
    for index in range(start, len(grid)):
        if _is_full_width_single(grid[index], rows[index], width):
            stats.caption_rows_dropped += 1
            continue
        if _only_spans_down(rows[index], width) and index + 1 < len(grid):
            stats.spanning_rows_dropped += 1
            continue
        texts = [cell.text for cell in grid[index]]
        if not any(text.strip() for text in texts):
            stats.empty_rows_dropped += 1
            continue
        body.append(texts)
    if not body:
        raise TableRejected("no_body_rows", f"{table_id}: a header row and nothing else")
    header, body = _drop_empty_columns(header, body, stats)
    width = len(header)
    if width < 2:
        raise TableRejected("single_column", f"{table_id}: one column")
    cells = width * (len(body) + 1)
    if cells > max_cells:
        raise TableRejected("too_many_cells", f"{table_id}: {cells} cells, at most {max_cells}")
    return make_table(table_id, header, body)


def infobox_table(pairs: Sequence[Tuple[str, str]], table_id: str, max_cells: int = MAX_CELLS
                  ) -> interaction_pb2.Table:
    """An infobox's (label, value) pairs transposed: the labels are the header, the values one row.

    Pairs with an empty label or value are left out (infoboxes list every field their template
    has, filled or not).
    """
    kept = [(label, value) for label, value in pairs if label.strip() and value.strip()]
    if len(kept) < 2:
        raise TableRejected("single_column" if kept else "empty_table",
                            f"{table_id}: {len(kept)} filled infobox fields")
    if 2 * len(kept) > max_cells:
        raise TableRejected("too_many_cells", f"{table_id}: {2 * len(kept)} cells, at most {max_cells}")
    return make_table(table_id, [label for label, _ in kept], [[value for _, value in kept]])
