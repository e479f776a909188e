"""A table with the selected cells marked: as text for a terminal, as a self-contained HTML page.

    print(render_text(table, result))          # selected cells as *text*, long tables elided
    html = render_html(table, [result1, ...])  # one page: the conversation, then the table

`table` is the Table proto of the whole table (`TableEncoder.prepare(...).table`); results give
the user's coordinates, so the marks land on the user's cells even when the model saw a pruned
table.
"""

import html
from typing import List, Optional, Sequence, Set

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.qa.ask_results import AskResult, format_number

_CELL_WIDTH = 24


def _clip(text: str, width: int = _CELL_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def _rows_to_show(num_rows: int, selected_rows: Set[int], max_rows: int) -> List[int]:
    """The first rows up to `max_rows`, plus every row holding a selected cell."""
    return sorted(set(range(min(num_rows, max_rows))) | selected_rows)


def _grid(header: List[str], lines: List[List[str]]) -> List[str]:
    """The header and rows as aligned text lines, columns apart by " | ", a rule under the header."""
    widths = [max(len(line[i]) for line in [header] + lines) for i in range(len(header))]
    formatted = [" | ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip()
                 for line in [header] + lines]
    formatted.insert(1, "-+-".join("-" * width for width in widths))
    return formatted


def render_text(table: interaction_pb2.Table, result: AskResult, max_rows: int = 20) -> str:
    """The answer line, diagnostics, and the table with selected cells as `*text*`."""
    selected = set(result.coordinates)
    header = ["#"] + [_clip(c.text) for c in table.columns]
    shown = _rows_to_show(len(table.rows), {r for r, _ in selected}, max_rows)
    lines: List[List[str]] = []
    previous = -1
    for row in shown:
        if row != previous + 1:
            lines.append(["…"] + [""] * len(table.columns))
        cells = [(f"*{_clip(cell.text)}*" if (row, column) in selected else _clip(cell.text))
                 for column, cell in enumerate(table.rows[row].cells)]
        lines.append([str(row)] + cells)
        previous = row
    formatted = _grid(header, lines)
    if shown and shown[-1] < len(table.rows) - 1:  # Below the table: it would widen the "#" column.
        formatted.append(f"… {len(table.rows) - 1 - shown[-1]} more rows")
    answer = [f"Q: {result.question}", f"A: {result.summary}"]
    if result.model:
        answer.append(f"   answered by: {result.model}")
    if result.operator in ("SUM", "AVERAGE") and result.numbers:
        shown_numbers = ", ".join(format_number(n) for n in result.numbers[:20])
        more = len(result.numbers) - 20
        answer.append(f"   numbers used: {shown_numbers}" + (f", … and {more:,} more" if more > 0 else ""))
    if result.confidence is not None:
        answer.append(f"   confidence: {result.confidence:.2f}"
                      + ("" if result.calibrated else " (uncalibrated)")
                      + (" - not sure" if result.sure is False else ""))
    answer += [f"   note: {note}" for note in result.notes + result.diagnostics]
    return "\n".join(answer + [""] + formatted)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-top: 1em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; }
th { background: #f3f3f3; }
td.selected { background: #ffe08a; font-weight: bold; }
td.pruned { color: #999; }
.answer { font-size: 1.2em; margin: 0.2em 0; }
.question { color: #555; margin-top: 1em; }
.note { color: #8a5a00; font-size: 0.9em; }
"""


_PRUNED_CELL = ' class="pruned" title="not seen by the model (pruned)"'


def render_table_html(table: interaction_pb2.Table, result: Optional[AskResult] = None,
                      max_rows: int = 200) -> str:
    """The `<table>` element, its cells marked for `result` (none marked without one).

    Every cell carries its coordinates (`data-row`, `data-column`, the user's 0-based body row and
    column). Selected cells have class "selected"; every cell the model saw carries its probability
    in `title` (shown on hover) and `data-probability`; a cell that pruning cut has class "pruned".
    Of a long table, the first `max_rows` rows and every row with a selected cell are shown.
    """
    selected = set(result.coordinates) if result else set()
    probabilities = result.cell_probabilities if result else {}
    # A cell the model did not see (pruning cut its row or column) is greyed; one it saw may have
    # no probability on record (a big table's windows keep only those that could matter).
    kept_rows = set(result.kept_rows) if result else set()
    kept_columns = set(result.kept_columns) if result else set()
    width = len(table.columns)
    parts = ["<table><thead><tr>" + "".join(f"<th>{html.escape(c.text)}</th>" for c in table.columns)
             + "</tr></thead><tbody>"]
    shown = _rows_to_show(len(table.rows), {r for r, _ in selected}, max_rows)
    previous = -1
    for row_index in shown:
        if row_index != previous + 1:
            parts.append(f'<tr class="elided"><td colspan="{width}">…</td></tr>')
        cells = []
        # One f-string per cell, the attributes in a fixed order: this loop is most of a page
        # answer's rendering time (a table's every shown cell, for every answer).
        for column, cell in enumerate(table.rows[row_index].cells):
            coordinate = (row_index, column)
            mark = ' class="selected"' if coordinate in selected else ""
            p = probabilities.get(coordinate)
            if p is not None:
                seen = f' title="p = {p:.3f}" data-probability="{p:.4f}"'
            else:
                seen = _PRUNED_CELL if result and (row_index not in kept_rows or column not in kept_columns) else ""
            cells.append(f'<td{mark}{seen} data-row="{row_index}" data-column="{column}">'
                         f"{html.escape(cell.text)}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
        previous = row_index
    if shown and shown[-1] < len(table.rows) - 1:
        parts.append(f'<tr class="elided"><td colspan="{width}">… '
                     f"{len(table.rows) - 1 - shown[-1]} more rows</td></tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


def render_html(table: interaction_pb2.Table, results: Sequence[AskResult], title: str = "tapas-tf",
                max_rows: int = 200) -> str:
    """A self-contained page: every question and answer, then the table marked for the last one
    (`render_table_html`)."""
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>"]
    for result in results:
        parts.append(f'<p class="question">Q: {html.escape(result.question)}</p>')
        parts.append(f'<p class="answer">A: {html.escape(result.summary)}</p>')
        parts += [f'<p class="note">{html.escape(note)}</p>' for note in result.notes + result.diagnostics]
    parts.append(render_table_html(table, results[-1] if results else None, max_rows))
    parts.append("</body></html>")
    return "\n".join(parts)


def render_verdict_text(result, max_rows: int = 20) -> str:
    """A `fact_checker.VerifyResult` for a terminal: the verdict with P(entailed), the model, the
    diagnostics, then the table the model read (its first `max_rows` rows)."""
    lines = [f"S: {result.statement}",
             f"V: {result.verdict} (P(entailed) = {result.probability:.2f})"]
    if result.model:
        lines.append(f"   judged by: {result.model}")
    lines += [f"   note: {note}" for note in result.diagnostics]
    table = result.table
    if table is None:
        return "\n".join(lines)
    header = ["#"] + [_clip(str(name)) for name in table.columns]
    body = [[str(index)] + [_clip(str(text)) for text in row]
            for index, row in zip(table.index[:max_rows], table.values[:max_rows].tolist())]
    formatted = _grid(header, body)
    if len(table) > max_rows:
        formatted.append(f"… {len(table) - max_rows} more rows")
    return "\n".join(lines + [""] + formatted)
