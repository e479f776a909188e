"""The manifest of a model's training tables: `training_tables.txt.gz`, one table per line.

Every bundled model lists every table that any stage of its training saw, by the names of the
training-data rule (`tapas_tf.data.training_tables`):

    wtq:csv/204-csv/590.csv          a WikiTableQuestions table
    sqa:table_csv/204_590.csv        an SQA table
    tabfact:2-1000181-1.html.csv     a TabFact table
    page:204-page/590#2              the third wikitable of a rendered page (#infobox0: its first infobox)
    page:Some title#0                a table of a page of another dump
    own:sales/2024.csv               a table of none of the releases (your own)

Each stage writes its own manifest (`collect-tables --manifest_out`, the mix of the fine-tuning
data); `tapas-tf bundle --training_tables=...` merges them into the bundle's.
"""

import gzip
import re
from typing import Iterable, List

MANIFEST_FILE = "training_tables.txt.gz"
KINDS = ("wtq", "sqa", "tabfact", "page", "own")
_LINE = re.compile(r"^(?:%s):\S.*$" % "|".join(KINDS))


class ManifestError(ValueError):
    """A manifest line that is not `KIND:NAME`, naming the file and the line."""


def _open(path: str, mode: str):
    return gzip.open(path, mode + "t", encoding="utf-8") if path.endswith(".gz") else open(path, mode, encoding="utf-8")


def read_manifest(path: str) -> List[str]:
    """The table names of a manifest (`.txt` or `.txt.gz`), in file order; blank lines are ignored.

    Raises:
      ManifestError: a line that does not start with one of `KINDS` and a colon.
      OSError: the file cannot be read (a truncated gzip file raises EOFError, an OSError too).
    """
    names = []
    try:
        with _open(path, "r") as f:
            for number, line in enumerate(f, start=1):
                name = line.rstrip("\n")
                if not name.strip():
                    continue
                if not _LINE.match(name):
                    raise ManifestError(f"{path}:{number}: not a manifest line (KIND:NAME, KIND one of "
                                        f"{', '.join(KINDS)}): {name[:80]!r}")
                names.append(name)
    except EOFError as e:
        raise OSError(f"{path}: the gzip data ends before its end marker (the file is truncated)") from e
    return names


def write_manifest(path: str, names: Iterable[str]) -> int:
    """Writes the distinct names, sorted, one per line; returns how many."""
    unique = sorted(set(names))
    with _open(path, "w") as f:
        f.writelines(f"{name}\n" for name in unique)
    return len(unique)


def merge_manifests(paths: Iterable[str]) -> List[str]:
    """The sorted union of the manifests' names."""
    names = set()
    for path in paths:
        names.update(read_manifest(path))
    return sorted(names)
