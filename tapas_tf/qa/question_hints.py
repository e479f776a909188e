"""What a question's words say about the answer it wants, for notes to the user.

    aggregation_cue("how many gold medals did norway win?")   # "how many"
    aggregation_cue("which city is the largest?")            # None

A model without an aggregation head can only select cells. When a question reads like counting
or arithmetic, the ask API says so in the answer's diagnostics instead of returning cells that
look like an answer. The cues are the phrasing of WikiTableQuestions' and WikiSQL's aggregation
questions; a cue is a hint for a note, never an input to the model.
"""

import re
from typing import Optional

# Whole words or phrases, matched case-insensitively; the first found is reported.
AGGREGATION_CUES = (
    "how many", "how much", "number of", "count", "total", "sum", "average", "mean", "combined",
    "altogether", "in all",
)
_PATTERN = re.compile(r"\b(" + "|".join(re.escape(cue).replace(r"\ ", r"\s+") for cue in AGGREGATION_CUES) + r")\b",
                      re.IGNORECASE)


def aggregation_cue(question: str) -> Optional[str]:
    """The first aggregation cue in `question` (lower case, single spaces), or None."""
    found = _PATTERN.search(question or "")
    return " ".join(found.group(1).lower().split()) if found else None


def no_aggregation_head_note(question: str) -> Optional[str]:
    """The note for a model without an aggregation head, when `question` reads like aggregation."""
    cue = aggregation_cue(question)
    if cue is None:
        return None
    return (f'This question looks like it needs counting or arithmetic ("{cue}"), but this model has no '
            "aggregation head: it can only select cells, so the answer shows cells, not a computed value.")
