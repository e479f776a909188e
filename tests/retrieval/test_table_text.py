"""The text a table is retrieved by: title, header, cells row by row, and a visible cell limit."""

import pytest

from tapas_tf.retrieval.table_text import TableDocument, table_document

COLUMNS = ["Name", "Height"]
ROWS = [["Torre Jaume I", "107 m"], ["Gant Hohtaelli", "94 m"], ["Singapore cable car", "88 m"]]


def test_the_whole_table_fits():
    doc = table_document("Aerial lift pylons", COLUMNS, ROWS)
    assert doc == TableDocument(
        text="Aerial lift pylons\nName Height\nTorre Jaume I 107 m\nGant Hohtaelli 94 m\nSingapore cable car 88 m",
        cells_used=6,
        cells_dropped=0,
        heading_lines=2,
    )


def test_the_sparse_text_repeats_title_and_header_only():
    doc = table_document("Aerial lift pylons", COLUMNS, ROWS[:1])
    assert doc.sparse_text(3) == ("Aerial lift pylons\nName Height\n" * 3) + "Torre Jaume I 107 m"
    assert doc.sparse_text(1) == doc.text
    untitled = table_document("", COLUMNS, ROWS[:1])
    assert untitled.sparse_text(2) == "Name Height\nName Height\nTorre Jaume I 107 m"
    with pytest.raises(ValueError, match="heading_repeats"):
        doc.sparse_text(0)


def test_max_cells_cuts_row_by_row_and_counts_what_was_cut():
    doc = table_document("Aerial lift pylons", COLUMNS, ROWS, max_cells=3)
    # The limit falls inside the second row: its first cell is kept, the rest counted as dropped.
    assert doc.text == "Aerial lift pylons\nName Height\nTorre Jaume I 107 m\nGant Hohtaelli"
    assert (doc.cells_used, doc.cells_dropped) == (3, 3)


def test_max_cells_zero_keeps_title_and_header():
    doc = table_document("Pylons", COLUMNS, ROWS, max_cells=0)
    assert (doc.text, doc.cells_used, doc.cells_dropped) == ("Pylons\nName Height", 0, 6)


def test_rows_may_be_a_generator_and_blank_cells_are_neither_text_nor_counted():
    rows = (row for row in [["a\nb", "  "], [None, "c   d"], ["", ""]])
    doc = table_document("", [" ", "col"], rows, max_cells=2)
    # No title line (blank); one line per row with text; "a\nb" stays on its row.
    assert doc.text == "col\na b\nc d"
    assert (doc.cells_used, doc.cells_dropped) == (2, 0)


def test_non_string_cells_are_written_as_text():
    doc = table_document("t", ["year", "gold"], [[1988, 3.5]])
    assert doc.text == "t\nyear gold\n1988 3.5"


def test_negative_max_cells_is_an_error():
    with pytest.raises(ValueError, match="max_cells"):
        table_document("t", COLUMNS, ROWS, max_cells=-1)
