"""What a question's words say about the answer it wants: for notes to the user, routing, and
accuracy by kind of question.

    aggregation_cue("how many gold medals did norway win?")   # "how many"
    aggregation_cue("which city is the largest?")            # None
    question_kind("what is the average area?")               # "average"
    question_kind("what is the difference in height between a and b?")   # "comparison"

TAPAS selects cells and may COUNT, SUM or AVERAGE them; it cannot subtract, divide or compare two
values. The cues are the phrasing of WikiTableQuestions' and WikiSQL's questions; a cue is a hint
for a note or a report, never an input to the model.
"""

import re
from typing import Optional

# Whole words or phrases, matched case-insensitively; the first found is reported.
AGGREGATION_CUES = (
    "how many", "how much", "number of", "count", "total", "sum", "average", "mean", "combined",
    "altogether", "in all",
)

# The kinds `question_kind` tells apart, in the order it tries them.
QUESTION_KINDS = ("comparison", "average", "sum", "count", "superlative", "lookup")

_ADJECTIVES = (r"more|less|fewer|higher|lower|longer|shorter|taller|older|younger|bigger|larger|smaller|"
               r"greater|heavier|lighter|faster|slower|earlier|later|farther|further|wider|deeper")


def _words(*phrases: str) -> "re.Pattern[str]":
    return re.compile(r"\b(" + "|".join(phrases) + r")\b", re.IGNORECASE)


_AGGREGATION = _words(*(re.escape(cue).replace(r"\ ", r"\s+") for cue in AGGREGATION_CUES))
_CUES = {
    # A difference, a ratio or a margin: a computation TAPAS has no operator for.
    "comparison": _words(r"difference", r"differ(s|ed)?", r"ratio", r"margin", r"times\s+(as|more|less)",
                         rf"how\s+(many|much)\s+({_ADJECTIVES})", r"by\s+how\s+(many|much)",
                         rf"how\s+(many|much)\s+\w+\s+({_ADJECTIVES})\s+(was|is|were|are|did|does|do)",
                         # "... older than 30" is a count with a condition, "... older than bob" a difference.
                         rf"how\s+(many|much)\s+\w+(\s+\w+)?\s+({_ADJECTIVES})\s+than\s+(?!\d)"),
    "average": _words(r"average", r"mean", r"avg"),
    "sum": _words(r"total", r"sum", r"combined", r"altogether", r"in\s+all", r"all\s+together"),
    "count": _words(r"how\s+many", r"number\s+of", r"count"),
    "superlative": _words(
        r"most", r"least", r"highest", r"lowest", r"largest", r"smallest", r"biggest", r"longest",
        r"shortest", r"tallest", r"oldest", r"youngest", r"newest", r"latest", r"earliest", r"first",
        r"last", r"top", r"best", r"worst", r"greatest", r"fewest", r"fastest", r"slowest", r"maximum",
        r"minimum", r"max", r"min"),
}


def aggregation_cue(question: str) -> Optional[str]:
    """The first aggregation cue in `question` (lower case, single spaces), or None."""
    found = _AGGREGATION.search(question or "")
    return " ".join(found.group(1).lower().split()) if found else None


def question_kind(question: str) -> str:
    """One of QUESTION_KINDS: the first kind whose cue `question` holds, else "lookup".

    "how many more medals than X" is a comparison before it is a count; "what is the total number
    of ..." is a sum by its words, although a count may be meant (notes say which was computed).
    """
    for kind, pattern in _CUES.items():
        if pattern.search(question or ""):
            return kind
    return "lookup"
