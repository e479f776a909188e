"""The training-data rule: which released tables, and which Wikipedia pages, any training stage may use.

    rule = TrainingTableRule.from_releases(Releases(wtq_dir="wtq", sqa_dir="sqa", tabfact_dir="tabfact",
                                                    wtq_pages_dir="wikipedia/wtq_pages"))
    decision = rule.decide("csv/204-csv/590.csv")          # Decision(kept=True, reason="kept", ...)
    decision.manifest_name                                 # "wtq:csv/204-csv/590.csv"

Train, pre-train and make synthetic data only from tables that a training split names, and from
Wikipedia pages that hold no table of another split:

- a WikiTableQuestions table (`csv/2xx-csv/N.csv`, the same table as SQA's `table_csv/2xx_N.csv`)
  is kept if WTQ's `training.tsv` names it and no scored dev split does (`random-split-1-dev.tsv`
  of WTQ and SQA by default); every other WTQ table is an evaluation table (WTQ's test tables are
  all those that `training.tsv` does not name), even where SQA's train split names it;
- a TabFact table (`2-1000181-1.html.csv`) is kept if `train_examples.json` names it;
- a table of a Wikipedia page (`document_title`) is kept unless the page holds a table of another
  split: the page of an evaluation WTQ table (`wtq_pages/2xx-page/N.json` says which), any other
  page file of the same article, or a page whose title is the caption of a TabFact table outside
  train;
- a table of none of these releases (a table of your own) is kept.

A WTQ or SQA table seen without the WTQ release, or a TabFact table without the TabFact release,
cannot be shown to be a training table, and is excluded (`*_release_not_given`). Every decision
has a reason (`REASONS`), and kept tables a manifest name: `wtq:csv/204-csv/590.csv`,
`sqa:table_csv/204_590.csv`, `tabfact:2-1000181-1.html.csv`, `page:204-page/590#K` (the K-th
wikitable of that page file; `#infoboxK` for its K-th infobox), `page:TITLE#K` for pages of
other dumps, or `own:ID` for a table of your own.
"""

import csv
import dataclasses
import glob
import json
import os
import re
from typing import Dict, Iterable, List, Optional, Set, Tuple

from tapas_tf.data.table_collection import normal_title as _normal_title, table_name

KEPT = "kept"
REASONS = (
    KEPT,
    "wtq_not_in_training_tsv",  # WTQ's test tables (and SQA train tables that are WTQ test tables).
    "wtq_in_scored_dev_split",  # Tables of the dev split a score is measured on.
    "tabfact_outside_train",
    "page_holds_evaluation_table",  # A Wikipedia page with a WTQ evaluation table, or its article.
    "page_is_tabfact_evaluation_caption",  # A page whose title a TabFact table outside train has.
    "wtq_release_not_given",
    "tabfact_release_not_given",
)
SCORED_DEV_FILES = ("random-split-1-dev.tsv",)
_WTQ_FORM = re.compile(r"(?:^|/)(?:csv/)?\d{3}-csv/\d+\.csv$|(?:^|/)(?:table_csv/)?\d{3}_\d+\.csv$")
_TABFACT_FORM = re.compile(r"^(?:.*/)?(\d+-\d+-\d+\.html\.csv)$")
_PAGE_TABLE_INDEX = re.compile(r"_((?:infobox)?\d+)$")  # The Wikipedia job's ids: TITLE_2, TITLE_infobox0.


@dataclasses.dataclass(frozen=True)
class Releases:
    """Where the released data sets are (any may be None: its tables then cannot be kept)."""

    wtq_dir: Optional[str] = None  # training.tsv, random-split-1-dev.tsv, csv/2xx-csv/N.csv
    sqa_dir: Optional[str] = None  # train.tsv, random-split-1-dev.tsv
    tabfact_dir: Optional[str] = None  # train_examples.json, val_examples.json, all_csv/
    wtq_pages_dir: Optional[str] = None  # 2xx-page/N.json: the page of each WTQ table
    scored_dev_files: Tuple[str, ...] = SCORED_DEV_FILES


@dataclasses.dataclass(frozen=True)
class Decision:
    kept: bool
    reason: str  # One of REASONS.
    manifest_name: Optional[str]  # For a kept table: its line of training_tables.txt.gz.


class ReleaseFileError(ValueError):
    """A release file the rule needs cannot be read."""


def _tsv_column(path: str, column: str) -> List[str]:
    """One column of a release TSV (SQA's quoted fields hold tabs and newlines, so csv does the parsing)."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise ReleaseFileError(f"{path}:1: no {column!r} column in the header ({reader.fieldnames})")
        return [row[column] for row in reader if row.get(column)]


def _wtq_names(path: str, column: str) -> Set[str]:
    return {table_name(value) for value in _tsv_column(path, column)}


def _json_object(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        try:
            value = json.load(f)
        except json.JSONDecodeError as e:
            raise ReleaseFileError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    if not isinstance(value, dict):
        raise ReleaseFileError(f"{path}: not a JSON object of tables")
    return value


@dataclasses.dataclass
class TrainingTableRule:
    """The rule over the releases given; build it with `from_releases`."""

    wtq_training: Optional[Set[str]] = None  # None: no WTQ release given.
    wtq_excluded: Dict[str, str] = dataclasses.field(default_factory=dict)  # name -> reason
    tabfact_training: Optional[Set[str]] = None
    tabfact_excluded: Set[str] = dataclasses.field(default_factory=set)
    excluded_titles: Dict[str, str] = dataclasses.field(default_factory=dict)  # normal title -> reason
    page_files: Dict[str, List[str]] = dataclasses.field(default_factory=dict)  # normal title -> 2xx-page/N

    @classmethod
    def from_releases(cls, releases: Releases) -> "TrainingTableRule":
        rule = cls()
        if releases.wtq_dir:
            rule._read_wtq(releases)
        if releases.tabfact_dir:
            rule._read_tabfact(releases.tabfact_dir)
        if releases.wtq_pages_dir:
            rule._read_pages(releases.wtq_pages_dir)
        return rule

    def _read_wtq(self, releases: Releases) -> None:
        training = _wtq_names(os.path.join(releases.wtq_dir, "training.tsv"), "context")
        every = {table_name(os.path.relpath(p, releases.wtq_dir))
                 for p in glob.glob(os.path.join(releases.wtq_dir, "csv", "*-csv", "*.csv"))}
        scored: Set[str] = set()
        for directory, column in ((releases.wtq_dir, "context"), (releases.sqa_dir, "table_file")):
            for file_name in releases.scored_dev_files if directory else ():
                path = os.path.join(directory, file_name)
                if os.path.exists(path):
                    scored |= _wtq_names(path, column)
        if releases.sqa_dir:  # SQA train's tables outside training.tsv are WTQ test tables.
            every |= _wtq_names(os.path.join(releases.sqa_dir, "train.tsv"), "table_file")
        self.wtq_training = training - scored
        self.wtq_excluded = {name: "wtq_in_scored_dev_split" for name in scored}
        self.wtq_excluded.update({name: "wtq_not_in_training_tsv" for name in every - training})

    def _read_tabfact(self, tabfact_dir: str) -> None:
        train = _json_object(os.path.join(tabfact_dir, "train_examples.json"))
        self.tabfact_training = set(train)
        every = set(os.listdir(os.path.join(tabfact_dir, "all_csv"))) if os.path.isdir(
            os.path.join(tabfact_dir, "all_csv")) else set()
        self.tabfact_excluded = every - self.tabfact_training
        for file_name in ("val_examples.json", "test_examples.json"):
            path = os.path.join(tabfact_dir, file_name)
            if os.path.exists(path):
                for table_id, entry in _json_object(path).items():
                    self.tabfact_excluded.add(table_id)
                    if isinstance(entry, list) and len(entry) > 2 and isinstance(entry[2], str):
                        self.excluded_titles.setdefault(_normal_title(entry[2]), "page_is_tabfact_evaluation_caption")
        self.tabfact_excluded -= self.tabfact_training

    def _read_pages(self, pages_dir: str) -> None:
        """The article of every WTQ page file; an article holding an evaluation table is excluded whole."""
        for path in sorted(glob.glob(os.path.join(pages_dir, "*-page", "*.json"))):
            key = os.path.relpath(path, pages_dir)[:-len(".json")]  # 204-page/590
            title = _normal_title(str(_json_object(path).get("title", "")))
            self.page_files.setdefault(title, []).append(key)
            table = "csv/{}-csv/{}.csv".format(key.split("-page/")[0], key.split("-page/")[1])
            if self.wtq_training is not None and table not in self.wtq_training:
                self.excluded_titles[title] = "page_holds_evaluation_table"

    # --- decisions -------------------------------------------------------------------------------

    def decide(self, table_id: str, title: str = "") -> Decision:
        """The decision on one table: its id (any release's form, or a page table's), and the title
        of its page (`document_title`) where it has one."""
        if _WTQ_FORM.search(table_id.strip()):
            return self._decide_wtq(table_id)
        tabfact = _TABFACT_FORM.match(table_id.strip())
        if tabfact:
            return self._decide_tabfact(tabfact.group(1))
        if title:
            reason = self.excluded_titles.get(_normal_title(title))
            if reason:
                return Decision(False, reason, None)
            return Decision(True, KEPT, self._page_manifest_name(table_id, title))
        return Decision(True, KEPT, f"own:{table_id.strip()}")

    def _decide_wtq(self, table_id: str) -> Decision:
        if self.wtq_training is None:
            return Decision(False, "wtq_release_not_given", None)
        name = table_name(table_id)
        if name in self.wtq_training:
            prefix = "sqa" if "table_csv/" in table_id or re.search(r"\d{3}_\d+\.csv$", table_id) else "wtq"
            shown = table_id.strip() if prefix == "sqa" else name
            if prefix == "sqa" and not shown.startswith("table_csv/"):
                shown = "table_csv/" + os.path.basename(shown)
            return Decision(True, KEPT, f"{prefix}:{shown}")
        return Decision(False, self.wtq_excluded.get(name, "wtq_not_in_training_tsv"), None)

    def _decide_tabfact(self, table_id: str) -> Decision:
        if self.tabfact_training is None:
            return Decision(False, "tabfact_release_not_given", None)
        if table_id in self.tabfact_training:
            return Decision(True, KEPT, f"tabfact:{table_id}")
        return Decision(False, "tabfact_outside_train", None)

    def _page_manifest_name(self, table_id: str, title: str) -> str:
        index = _PAGE_TABLE_INDEX.search(table_id)
        k = index.group(1) if index else "0"
        files = self.page_files.get(_normal_title(title))
        return f"page:{files[0]}#{k}" if files else f"page:{title.strip()}#{k}"

    def exclusion_lines(self) -> List[str]:
        """The exclusions in the format `create-pretrain-data --exclude_tables` reads: every
        evaluation WTQ table by name and every excluded page as `title:...`, so the Wikipedia job
        leaves out whole pages."""
        lines = sorted(self.wtq_excluded)
        lines += sorted(f"title:{title}" for title in self.excluded_titles)
        return lines


def count_decisions(decisions: Iterable[Decision]) -> Dict[str, int]:
    """{reason: how many}, every reason of REASONS present (0 where none)."""
    counts = {reason: 0 for reason in REASONS}
    for decision in decisions:
        counts[decision.reason] += 1
    return counts
