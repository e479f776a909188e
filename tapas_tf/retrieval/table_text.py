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
    >>> print(doc.sparse_text(heading_repeats=2).splitlines()[:4])
    ['Aerial lift pylons', 'Name Height', 'Aerial lift pylons', 'Name Height']

One line for the title, one for the header and one per row, cells separated by a space; a cell's
own line breaks and runs of spaces become one space, so every row stays on one line. Blank cells
(empty, only whitespace, or None) are left out and not counted: the limit is on text, and a sparse
table should not spend it on nothing.

For BM25 the title and header lines are repeated (`sparse_text`): a question names its table's
subject and columns far more often than any one cell, and a cell's word should not weigh as much
as a header's. Repeating a field is the standard way to boost it in a single-field BM25 (three
times was best of 1, 2 and 3 on WTQ's and TabFact's training questions). A dense encoder reads
`text`, each line once.

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
    heading_lines: int = 0  # The first lines of `text` that are the title and the header.

    def sparse_text(self, heading_repeats: int = 1) -> str:
        """`text` with its title and header lines `heading_repeats` times (BM25's field boost)."""
        if heading_repeats < 1:
            raise ValueError(f"heading_repeats must be >= 1, got {heading_repeats}")
        lines = self.text.split("\n")
        heading, body = lines[:self.heading_lines], lines[self.heading_lines:]
        return "\n".join(heading * heading_repeats + body)


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
    heading_lines = len(lines)
    used = dropped = 0
    for row in rows:
        cells = [text for text in map(_clean, row) if text]
        room = max(0, max_cells - used)
        kept = cells[:room]
        used += len(kept)
        dropped += len(cells) - len(kept)
        if kept:
            lines.append(" ".join(kept))
    return TableDocument(text="\n".join(lines), cells_used=used, cells_dropped=dropped, heading_lines=heading_lines)


def _join(cells: Iterable[object]) -> str:
    return " ".join(text for text in map(_clean, cells) if text)
