"""The text a table is retrieved by: its title, its header, then its cells row by row.

    >>> from tapas_tf.retrieval.table_text import table_document
    >>> doc = table_document("Aerial lift pylons", ["Name", "Height"],
    ...                      [["Torre Jaume I", "107 m"], ["Gant Hohtaelli", "94 m"]], max_cells=3)
    >>> print(doc.text)
    Aerial lift pylons
    Name Height
    Torre Jaume I 107 m
    Gant Hohtaelli
    >>> doc.cells_used, doc.cells_dropped
    (3, 1)

One line for the title, one for the header and one per row, cells separated by a space; a cell's
own line breaks and runs of spaces become one space, so every row stays on one line. Blank cells
(empty, only whitespace, or None) are left out and not counted: the limit is on text, and a sparse
table should not spend it on nothing.

`max_cells` bounds the body cells (the title and header are always kept), because a few huge
tables would otherwise dominate an index's size and its document-length statistics. The cells
past the limit are still counted (`cells_dropped`), so a caller can report how much was cut.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

__all__ = ["TableDocument", "table_document"]


@dataclasses.dataclass(frozen=True)
class TableDocument:
    """A table's retrieval text and how many body cells went into it or were cut."""

    text: str
    cells_used: int
    cells_dropped: int


def _clean(cell: object) -> str:
    """One line of text for a cell; "" for a blank one."""
    if cell is None:
        return ""
    return " ".join(str(cell).split())


def table_document(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    max_cells: int = 5000,
) -> TableDocument:
    """The retrieval text of a table: title, header, then at most `max_cells` body cells.

    `rows` may be any iterable (a list, a generator, `df.itertuples(index=False)`); it is read
    to the end even past the limit, to count the dropped cells.
    """
    if max_cells < 0:
        raise ValueError(f"max_cells must be >= 0, got {max_cells}")
    lines = [line for line in (_clean(title), _join(columns)) if line]
    used = dropped = 0
    for row in rows:
        cells = [text for text in map(_clean, row) if text]
        room = max(0, max_cells - used)
        kept = cells[:room]
        used += len(kept)
        dropped += len(cells) - len(kept)
        if kept:
            lines.append(" ".join(kept))
    return TableDocument(text="\n".join(lines), cells_used=used, cells_dropped=dropped)


def _join(cells: Iterable[object]) -> str:
    return " ".join(text for text in map(_clean, cells) if text)
