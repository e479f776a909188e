"""Arithmetic TAPAS has no operator for, computed by tapas-tf from the cells the model selected.

    computed = compute("how much taller is torre a than torre b?", result.cells, row_texts)
    computed.expression     # "113.6 m − 107 m = 6.6 m"
    computed.answer         # "6.6 m"
    computed.note()         # "tapas-tf computed this difference from the 2 selected cells, not the model: ..."

TAPAS selects cells and may COUNT, SUM or AVERAGE them. People also ask for differences ("how
many more", "by how much"), ratios ("how many times as many"), percentages, comparisons that
want yes or no ("is A taller than B?") and spans between dates ("how many years between").
When a question's words ask for one of these (`asked`) and the model selected the cells it needs
(two numbers or dates; or one, with a number in the question), the value is computed here and
the answer says so, with the expression. Nothing is computed otherwise: the answer stays the
model's, with `answer_notes`' note on what TAPAS cannot compute.

Which cell is "A": the one whose row the question names first (`row_texts`: the texts of a
cell's row); without that, the cells in table order. A difference is always the larger minus the
smaller (WikiTableQuestions' answers are magnitudes). A unit the two cells share ("m", "$") is
kept; a ratio or a percentage has none.
"""

import dataclasses
import datetime
import re
from typing import Callable, List, Optional, Sequence, Tuple

from tapas_tf.data import number_parsing
from tapas_tf.data.text_normalization import normalize_for_match
from tapas_tf.qa.ask_results import SelectedCell, format_number

KINDS = ("difference", "ratio", "percentage", "comparison", "date_span")
MINUS = "\u2212"
RowTexts = Callable[[int], Sequence[str]]

_MORE = ("more|higher|longer|taller|older|bigger|larger|greater|heavier|faster|later|farther|further|wider|"
         "deeper|richer|hotter|warmer")
_LESS = "less|fewer|lower|shorter|younger|smaller|lighter|slower|earlier|cheaper|colder|cooler|narrower"
_COMPARATIVE = f"{_MORE}|{_LESS}"
_UNITS = r"years?|months?|weeks?|days?"


def _words(pattern: str) -> "re.Pattern[str]":
    return re.compile(pattern, re.IGNORECASE)


# In the order `asked` tries them: a yes/no comparison before a difference ("is a taller than b"
# is not "how much taller"), a date span before a difference ("how many years between").
_ASKED = (
    ("comparison", _words(rf"^\s*(is|was|are|were|did|does|do|has|had|can)\b.*\b({_COMPARATIVE})\b.*\bthan\b")),
    ("date_span", _words(rf"\bhow\s+(many|much)\s+({_UNITS})\b.*\b(between|from|after|before|since|until|"
                         rf"passed|elapsed|separate|apart)\b|\bhow\s+long\s+(between|after|before|from)\b")),
    # Not "how many times did x win": that counts; "how many times as many/larger ..." divides.
    ("ratio", _words(rf"\bratio\b|\bhow\s+many\s+times\s+(as|more|{_COMPARATIVE})\b|\btimes\s+as\s+(many|much)\b")),
    ("percentage", _words(r"\bwhat\s+(percent|percentage|share|proportion)\b.*\b(of|were|was|did)\b")),
    ("difference", _words(rf"\bdifference\b|\bdiffer(s|ed)?\b|\bmargin\b|\bgap\b|\bby\s+how\s+(many|much)\b|"
                          rf"\bhow\s+(many|much)\s+({_COMPARATIVE})\b|"
                          rf"\bhow\s+(many|much)\s+\w+(\s+\w+)?\s+({_COMPARATIVE})\s+(than\s+(?![$€£¥]?\d)|did|does|do|was|is|were|are)")),
    # "how many ... taller than 100 m" is a count with a condition, "... taller than torre b" a difference.
)
_GREATER = _words(rf"\b({_MORE})\b")
_BOTH_ENDS = _words(r"\b(highest|most|largest|biggest|longest|greatest|maximum|max|first|top)\b.*\b(lowest|least|"
                    r"smallest|shortest|fewest|minimum|min|last|bottom)\b|\b(lowest|least|smallest|shortest|fewest|"
                    r"minimum|min|last|bottom)\b.*\b(highest|most|largest|biggest|longest|greatest|maximum|max|"
                    r"first|top)\b")
_THAN_NUMBER = re.compile(r"\bthan\s+([$€£¥]?\d[\d,.]*)", re.IGNORECASE)
# A number in a cell, with what is written around it: "$3.5 million", "113.6 m", "45%".
_AROUND = re.compile(r"^\s*(?P<prefix>[$€£¥]?)\s*[-+]?\d[\d,]*(\.\d+)?\s*(?P<suffix>.*?)\s*$")


@dataclasses.dataclass(frozen=True)
class Computed:
    """A value tapas-tf computed from selected cells.

    Attributes:
      kind: one of KINDS.
      value: the number (None for a yes/no comparison).
      answer: as shown: "6.6 m", "2.5", "25%", "yes", "6 years".
      expression: how: "113.6 m − 107 m = 6.6 m".
      cells: how many selected cells it used.
    """

    kind: str
    value: Optional[float]
    answer: str
    expression: str
    cells: int

    def note(self) -> str:
        what = {"difference": "difference", "ratio": "ratio", "percentage": "percentage",
                "comparison": "comparison", "date_span": "span between the dates"}[self.kind]
        used = f"{self.cells} selected cell" + ("" if self.cells == 1 else "s")
        return (f"tapas-tf computed this {what} from the {used}, not the model (which only selects cells): "
                f"{self.expression}.")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def with_computed(result, row_texts: Optional[RowTexts] = None):
    """`result` (an AskResult) with what `compute` computes from its cells, and its note first; the
    same result when nothing is computed."""
    computed = compute(result.question, result.cells, row_texts)
    if computed is None:
        return result
    return dataclasses.replace(result, computed=computed, notes=(computed.note(),) + tuple(result.notes))


def asked(question: str) -> Optional[str]:
    """The kind of arithmetic the question's words ask for (one of KINDS), or None."""
    for kind, pattern in _ASKED:
        if pattern.search(question or ""):
            return kind
    return None


def compute(question: str, cells: Sequence[SelectedCell], row_texts: Optional[RowTexts] = None) -> Optional[Computed]:
    """The arithmetic `question` asks for, over the selected `cells` (see the module docstring), or
    None when it asks for none or the cells do not hold what it needs."""
    kind = asked(question)
    if kind is None or not cells:
        return None
    if kind == "date_span":
        return _date_span(question, cells, row_texts)
    if kind == "difference" and len(cells) == 1:
        pair = _two_numbers(cells[0].text)  # A score "4–8": the margin within one cell.
        if pair is not None:
            low, high = sorted(pair)
            value = round(high - low, 9)
            return Computed(kind, value, format_number(value),
                            f"{format_number(high)} {MINUS} {format_number(low)} = {format_number(value)} "
                            f"(the two numbers of {cells[0].text!r})", 1)
    operands = _operands(question, cells, row_texts)
    if operands is None:
        return None
    (a, a_text), (b, b_text) = operands
    if kind == "difference":
        return _difference(a, a_text, b, b_text, len(cells))
    if kind == "ratio":
        if b == 0:
            return None
        value = round(a / b, 9)
        return Computed(kind, value, format_number(value), f"{_bare(a)} / {_bare(b)} = {format_number(value)}",
                        len(cells))
    if kind == "percentage":
        part, whole = sorted((a, b))
        if whole == 0:
            return None
        value = 100 * part / whole
        return Computed(kind, value, f"{format_number(round(value, 2))}%",
                        f"{_bare(part)} / {_bare(whole)} × 100 = {format_number(round(value, 2))}%", len(cells))
    return _comparison(question, a, a_text, b, b_text, len(cells))


def _difference(a: float, a_text: str, b: float, b_text: str, used: int) -> Computed:
    (high, high_text), (low, low_text) = sorted(((a, a_text), (b, b_text)), reverse=True)
    value = round(high - low, 9)  # 113.6 - 107 is 6.599999999999994 in binary.
    unit = _shared_unit(high_text, low_text)
    answer = _with_unit(value, unit)
    return Computed("difference", value, answer,
                    f"{_shown(high, high_text, unit)} {MINUS} {_shown(low, low_text, unit)} = {answer}", used)


def _comparison(question: str, a: float, a_text: str, b: float, b_text: str, used: int) -> Computed:
    comparative = re.search(rf"\b({_COMPARATIVE})\b", question, re.IGNORECASE).group(1).lower()
    greater = bool(_GREATER.fullmatch(comparative))
    holds = a > b if greater else a < b
    unit = _shared_unit(a_text, b_text)
    sign = ">" if a > b else "<" if a < b else "="
    answer = "yes" if holds else "no"
    return Computed("comparison", None, answer,
                    f"{_shown(a, a_text, unit)} {sign} {_shown(b, b_text, unit)}, so {comparative}: {answer}", used)


def _date_span(question: str, cells: Sequence[SelectedCell], row_texts: Optional[RowTexts]) -> Optional[Computed]:
    dates = [(cell, _first_date(cell.text)) for cell in cells]
    dated = [(cell, date) for cell, date in dates if date is not None]
    if len(dated) == 1:  # One cell that holds both ends: "1990–1998".
        years = [v for v in number_parsing.cell_values(dated[0][0].text) if isinstance(v, float)]
        if len(years) == 2 and all(1000 <= y <= 2999 for y in years):
            low, high = sorted(years)
            return Computed("date_span", high - low, f"{format_number(high - low)} years",
                            f"{format_number(high)} {MINUS} {format_number(low)} = {format_number(high - low)} years", 1)
        return None
    if len(dated) != 2:
        return None
    (first, a), (second, b) = _in_mention_order(question, dated, row_texts)
    unit = re.search(rf"\b({_UNITS})\b", question, re.IGNORECASE)
    unit_word = unit.group(1).lower().rstrip("s") if unit else "year"
    early, late = sorted((a, b))
    if unit_word == "year" or None in (early[1], early[2], late[1], late[2]):
        value = float(late[0] - early[0])
        shown = f"{format_number(value)} years"
        return Computed("date_span", value, shown, f"{late[0]} {MINUS} {early[0]} = {shown}", 2)
    days = (datetime.date(*late) - datetime.date(*early)).days
    value = {"day": days, "week": days / 7, "month": days / 30.4375}[unit_word]
    shown = f"{format_number(round(value, 1))} {unit_word}s"
    return Computed("date_span", value, shown,
                    f"{datetime.date(*late).isoformat()} {MINUS} {datetime.date(*early).isoformat()} = {shown}", 2)


def _first_date(text: str) -> Optional[Tuple[int, Optional[int], Optional[int]]]:
    for value in number_parsing.cell_values(text):
        if isinstance(value, tuple) and value[0] is not None:
            return value
    return None


def _operands(question: str, cells: Sequence[SelectedCell], row_texts: Optional[RowTexts]
              ) -> Optional[Tuple[Tuple[float, str], Tuple[float, str]]]:
    """((a, its text), (b, its text)): two selected numbers in the order the question names their rows;
    the largest and smallest of more when the question asks for both ends ("highest and lowest");
    one selected number and one in the question."""
    numbered = [(cell, _number(cell)) for cell in cells]
    numbered = [(cell, number) for cell, number in numbered if number is not None]
    if len(numbered) == 2:
        first, second = _in_mention_order(question, numbered, row_texts)
        return (first[1], first[0].text), (second[1], second[0].text)
    if len(numbered) > 2 and _BOTH_ENDS.search(question):
        high = max(numbered, key=lambda item: item[1])
        low = min(numbered, key=lambda item: item[1])
        return (high[1], high[0].text), (low[1], low[0].text)
    than = _THAN_NUMBER.search(question)
    if len(numbered) == 1 and than:  # "more than 40": the question's number is the other operand.
        given = [v for span in number_parsing.parse_text(normalize_for_match(than.group(1))) for v in span.values
                 if v.HasField("float_value")]
        if len(given) == 1:
            value = given[0].float_value
            return (numbered[0][1], numbered[0][0].text), (value, format_number(value))
    return None


def _number(cell: SelectedCell) -> Optional[float]:
    """The cell's number as its text writes it (its annotation is float32: 113.6 -> 113.59999), else
    its annotation."""
    if cell.number is None:
        return None
    written = [v for v in number_parsing.cell_values(cell.text) if isinstance(v, float)]
    if len(written) > 1:
        return None  # "4–8", "2 ft (610 mm)": which number is meant is not this module's guess.
    return written[0] if written and abs(written[0] - cell.number) <= 1e-3 * max(1.0, abs(cell.number)) \
        else cell.number


def _in_mention_order(question: str, items: List, row_texts: Optional[RowTexts]) -> List:
    """`items` ((cell, value) pairs) ordered by where the question first names a text of the cell's row;
    table order when it names neither (or no row texts are given)."""
    if row_texts is None:
        return list(items)
    text = normalize_for_match(question)

    def position(item) -> Tuple[int, int]:
        cell = item[0]
        found = [text.find(normalize_for_match(t)) for t in row_texts(cell.row) if len(t.strip()) >= 2]
        found = [f for f in found if f >= 0]
        return (min(found) if found else len(text) + 1, cell.row)

    return sorted(items, key=position)


def _shared_unit(a_text: str, b_text: str) -> Tuple[str, str]:
    """(prefix, suffix) written around both numbers ("$", "million"; "", "m"), else ("", "")."""
    a, b = _AROUND.match(a_text or ""), _AROUND.match(b_text or "")
    if not a or not b:
        return "", ""
    prefix, suffix = a.group("prefix"), a.group("suffix")
    if (prefix, suffix) != (b.group("prefix"), b.group("suffix")) or len(suffix) > 16 or re.search(r"\d", suffix):
        return "", ""
    return prefix, suffix


def _with_unit(value: float, unit: Tuple[str, str]) -> str:
    prefix, suffix = unit
    joiner = "" if suffix.startswith("%") or not suffix else " "
    return f"{prefix}{format_number(value)}{joiner}{suffix}"


def _two_numbers(text: str) -> Optional[Tuple[float, float]]:
    """The two numbers of a cell such as a score ("4–8", "2-3"), else None."""
    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*[-–—:]\s*\d+(\.\d+)?\s*", text or ""):
        return None
    first, second = re.findall(r"\d+(?:\.\d+)?", text)
    return float(first), float(second)


def _shown(value: float, text: str, unit: Tuple[str, str]) -> str:
    """An operand as its cell writes it ("2009", "113.6 m") when the cell holds only it, else formatted."""
    if _AROUND.match(text or "") and (text.strip().startswith(unit[0])) and (not unit[1] or text.strip().endswith(unit[1])):
        return " ".join(text.split())
    return _with_unit(value, unit)


def _bare(value: float) -> str:
    return format_number(value)
