"""The shared table rules: spans expanded, a header row required, title and caption rows dropped.

Tables are drawn as rows of RawCells; H(...) is a header cell, D(...) a data cell.
"""

import pytest

from tapas_tf.wikipedia.table_grid import (
    MAX_SPAN,
    GridStats,
    RawCell,
    TableRejected,
    expand_spans,
    infobox_table,
    to_table,
)


def H(text, colspan=1, rowspan=1):
    return RawCell(text, True, colspan, rowspan)


def D(text, colspan=1, rowspan=1):
    return RawCell(text, False, colspan, rowspan)


def _texts(table):
    return [[c.text for c in table.columns]] + [[c.text for c in row.cells] for row in table.rows]


def test_colspan_and_rowspan_are_expanded_by_copying():
    """
        | Year        | Film   | Writer |
        | 2013 (1st)  | (none)        |      <- colspan 2
        |   (rowspan) | Shahid | Vasay  |
    """
    rows = [[H("Year"), H("Film"), H("Writer")],
            [D("2013 (1st)", rowspan=2), D("(none)", colspan=2)],
            [D("Shahid"), D("Vasay")]]
    assert _texts(to_table(rows, "t")) == [["Year", "Film", "Writer"],
                                           ["2013 (1st)", "(none)", "(none)"],
                                           ["2013 (1st)", "Shahid", "Vasay"]]


def test_short_rows_are_padded_and_a_rowspan_is_cut_at_the_table_end():
    grid = expand_spans([[H("a"), H("b"), H("c")], [D("x")], [D("y", rowspan=99999)]])
    assert [[c.text for c in row] for row in grid] == [["a", "b", "c"], ["x", "", ""], ["y", "", ""]]


def test_a_huge_last_colspan_ends_at_the_table_edge_and_is_counted():
    """`colspan="99999"` ends its row, as a browser shows it; under a rowspan it starts one
    column in, and the row stays a body row (it is not a caption across the table)."""
    rows = [[H("Year"), H("Event"), H("Note")],
            [D("2010", rowspan=2), D("Opening"), D("first")],
            [D("Closing, date unknown", colspan=99999)],
            [D("2011"), D("Final", colspan=99999)]]
    stats = GridStats()
    assert _texts(to_table(rows, "t", stats)) == [
        ["Year", "Event", "Note"], ["2010", "Opening", "first"],
        ["2010", "Closing, date unknown", "Closing, date unknown"], ["2011", "Final", "Final"]]
    assert stats.spans_narrowed == 2
    assert stats.caption_rows_dropped == 0


def test_a_huge_colspan_with_cells_after_it_is_span_too_large():
    rows = [[H("Name"), H("Score")], [D("x", colspan=MAX_SPAN + 1), D("y")]]
    with pytest.raises(TableRejected, match=r"t: row 2: a cell spans 101 columns and 1 more cells follow it"
                       ) as error:
        to_table(rows, "t")
    assert error.value.reason == "span_too_large"
    # At MAX_SPAN the span is believed, and the table is as wide as it says (no header over y).
    with pytest.raises(TableRejected, match="no row of header cells") as error:
        to_table([[H("Name"), H("Score")], [D("x", colspan=MAX_SPAN), D("y")]], "t")
    assert error.value.reason == "no_header_row"


def test_a_column_no_row_splits_is_one_column():
    """`! a !! colspan=2 | b` over `| 1 || colspan=2 | 2`: the browser shows two columns."""
    stats = GridStats()
    rows = [[H("a"), H("b", colspan=2)], [D("1"), D("2", colspan=2)]]
    assert _texts(to_table(rows, "t", stats)) == [["a", "b"], ["1", "2"]]
    assert stats.spans_narrowed == 2


def test_title_rows_above_the_header_and_caption_rows_inside_are_dropped():
    stats = GridStats()
    rows = [[H("Medal table", colspan=3)],
            [H("Nation"), H("Gold"), H("Total")],
            [D("Rifle", colspan=3)],
            [D("URS"), D("4"), D("11")]]
    assert _texts(to_table(rows, "t", stats)) == [["Nation", "Gold", "Total"], ["URS", "4", "11"]]
    assert (stats.title_rows_dropped, stats.caption_rows_dropped) == (1, 1)


@pytest.mark.parametrize("rows, reason", [
    ([[D("a"), D("b")], [D("1"), D("2")]], "no_header_row"),
    ([[H("a"), D("b")], [D("1"), D("2")]], "no_header_row"),
    ([[H("a"), H("b")]], "no_body_rows"),
    ([[H("a")], [D("1")]], "single_column"),
    ([], "empty_table"),
    ([[H(str(i)) for i in range(10)]] + [[D("x")] * 10 for _ in range(50)], "too_many_cells"),
])
def test_refusals_name_their_reason(rows, reason):
    with pytest.raises(TableRejected) as error:
        to_table(rows, "t")
    assert error.value.reason == reason


def test_exactly_500_cells_is_allowed():
    rows = [[H(str(i)) for i in range(10)]] + [[D("x")] * 10 for _ in range(49)]
    assert len(to_table(rows, "t").rows) == 49


def test_infobox_is_one_header_row_and_one_data_row():
    table = infobox_table([("Born", "1 May 1960"), ("Spouse", ""), ("Occupation", "Writer")], "box")
    assert _texts(table) == [["Born", "Occupation"], ["1 May 1960", "Writer"]]
    with pytest.raises(TableRejected, match="1 filled"):
        infobox_table([("Born", "1960"), ("", "x")], "box")


def test_an_over_wide_footnote_row_does_not_widen_the_table():
    rows = [[H("a"), H("b")], [D("1"), D("2")], [D("Source: somewhere", colspan=12)]]
    stats = GridStats()
    assert _texts(to_table(rows, "t", stats)) == [["a", "b"], ["1", "2"]]
    assert stats.caption_rows_dropped == 1


def test_rows_and_columns_without_text_are_dropped_and_counted():
    rows = [[H("Flag"), H("Nation"), H("Gold")],
            [D(""), D("URS"), D("4")],
            [D(""), D(""), D("")],
            [D(""), D("YUG"), D("2")]]
    stats = GridStats()
    assert _texts(to_table(rows, "t", stats)) == [["Nation", "Gold"], ["URS", "4"], ["YUG", "2"]]
    assert (stats.empty_rows_dropped, stats.empty_columns_dropped) == (1, 1)


def test_a_second_header_row_is_merged_into_the_first():
    """
        | Game | Results        | Place |
        |      | Score | Record |       |
        | 1    | 7-3   | 1-0    | Home  |
    """
    rows = [[H("Game", rowspan=2), H("Results", colspan=2), H("Place", rowspan=2)],
            [H("Score"), H("Record")],
            [D("1"), D("7-3"), D("1-0"), D("Home")]]
    stats = GridStats()
    assert _texts(to_table(rows, "t", stats)) == [["Game", "Results Score", "Results Record", "Place"],
                                                  ["1", "7-3", "1-0", "Home"]]
    assert stats.header_rows_merged == 1


def test_a_row_that_only_spans_down_is_dropped_after_its_text_is_copied():
    """A year written once in a row of its own, spanning its nominees below."""
    rows = [[H("Year"), H("Film"), H("Designer")],
            [D("1990", rowspan=3)],
            [D("Dick Tracy"), D("Richard Sylbert")],
            [D("Hamlet"), D("Dante Ferretti")]]
    stats = GridStats()
    assert _texts(to_table(rows, "t", stats)) == [["Year", "Film", "Designer"],
                                                  ["1990", "Dick Tracy", "Richard Sylbert"],
                                                  ["1990", "Hamlet", "Dante Ferretti"]]
    assert stats.spanning_rows_dropped == 1


def test_a_year_spanning_rows_that_have_their_own_cells_is_kept():
    rows = [[H("Year"), H("Film")], [D("1990", rowspan=2), D("Dick Tracy")], [D("Hamlet")]]
    assert _texts(to_table(rows, "t")) == [["Year", "Film"], ["1990", "Dick Tracy"], ["1990", "Hamlet"]]
