"""The distinct tables of interaction files, without the tables an evaluation uses.

    names = table_names_in(["out/wtq_data/interactions/dev.tfrecord"])   # {"csv/204-csv/590.csv", ...}
    tables, counts = collect_tables(["out/wtq_data/interactions/train.tfrecord"], excluded=names)

The tables of the synthetic stage (`--task=SYNTHETIC` makes questions from any tables) and of
TabFact's statements should not include a table that a dev or test score is measured on: here a
table is named by `table_name`, which gives a WikiTableQuestions table (`csv/204-csv/590.csv`,
`204-csv/590.csv`) and the same table as SQA names it (`table_csv/204_590.csv`) one name, so
that excluding WTQ's or SQA's dev interactions excludes the table under either name. Other ids
(a Wikipedia page address, say) are their own names.

Each table is kept once (its first interaction), as a table-only interaction whose id is the
table's name. `counts`: `tables_read` (distinct), `kept`, `left_out_excluded`,
`duplicate_interactions` (further interactions of a table already seen).
"""

import collections
import re
from typing import Counter, Iterable, List, Optional, Set, Tuple

from tapas_tf.data import interaction_io
from tapas_tf.data.protos.interaction_pb2 import Interaction

_WTQ_NAME = re.compile(r"(?:^|/)(?:csv/)?(\d{3})-csv/(\d+)\.csv$")
_SQA_NAME = re.compile(r"(?:^|/)(?:table_csv/)?(\d{3})_(\d+)\.csv$")


def table_name(table_id: str) -> str:
    """One name per table: WTQ and SQA file names become `csv/2xx-csv/N.csv`; other ids stay."""
    text = table_id.strip()
    for pattern in (_WTQ_NAME, _SQA_NAME):
        found = pattern.search(text)
        if found:
            return f"csv/{found.group(1)}-csv/{found.group(2)}.csv"
    return text


def table_names_in(paths: Iterable[str]) -> Set[str]:
    """The names of the tables of every interaction of these files."""
    return {table_name(interaction.table.table_id) for path in paths
            for interaction in interaction_io.read_interactions(path)}


def normal_title(title: str) -> str:
    """A page title as exclusions match it: underscores as spaces, spaces collapsed, lower case
    (TabFact's captions are lower-cased page titles)."""
    return " ".join(title.replace("_", " ").split()).lower()


def normalize_exclusion(line: str) -> Optional[str]:
    """A line of a file of table names as the name it matches (None for blanks and `#` comments).

    Table ids pass unchanged; WikiTableQuestions names (`csv/204-csv/590.csv`, `204-csv/590.csv`)
    and SQA table files (`table_csv/204_590.csv`, the same tables) become `csv/204-csv/590.csv`
    (`table_name`), which is also the alias the rendered page of that table carries in the
    Wikipedia job; `title:Some page` names a page there (`title:some page`, see `normal_title`).
    """
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if text.startswith("title:"):
        return "title:" + normal_title(text[len("title:"):])
    return table_name(text)


def read_table_name_file(path: str) -> Set[str]:
    """The names of a file of table names, one per line (`normalize_exclusion`)."""
    with open(path, encoding="utf-8") as f:
        names = (normalize_exclusion(line) for line in f)
        return {name for name in names if name}


def collect_tables(paths: Iterable[str], excluded: Optional[Set[str]] = None) -> Tuple[List[Interaction], Counter]:
    """The distinct tables of the interactions in `paths`, in file order, without `excluded` names.

    Returns:
      (tables, counts): table-only interactions (id = the table's name, the table copied), and the
      counts named in the module docstring; `tables_read == kept + left_out_excluded`.
    """
    excluded = excluded or set()
    counts: Counter = collections.Counter()
    tables: List[Interaction] = []
    seen: Set[str] = set()
    for path in paths:
        for interaction in interaction_io.read_interactions(path):
            name = table_name(interaction.table.table_id)
            if name in seen:
                counts["duplicate_interactions"] += 1
                continue
            seen.add(name)
            counts["tables_read"] += 1
            if name in excluded:
                counts["left_out_excluded"] += 1
                continue
            counts["kept"] += 1
            table_only = Interaction(id=name)
            table_only.table.CopyFrom(interaction.table)
            tables.append(table_only)
    return tables, counts
