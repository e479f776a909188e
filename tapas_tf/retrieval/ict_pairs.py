"""Inverse-cloze pairs for pre-training a table retriever: a sentence of a table's page, and the table.

    counts = write_ict_collection(read_interactions("pages/interactions-00000-of-00001.tfrecord"),
                                  "ict/", sentences_per_table=2, seed=1)
    # ict/tables/*.csv, ict/titles.tsv, ict/queries.tsv (id, question, table_id), ict/report.json
    # tapas-tf train-retriever --tables=ict/tables --titles=ict/titles.tsv --queries=ict/queries.tsv ...

The inverse cloze task (Lee et al. 2019; for tables, Herzig et al. 2021) treats a sentence of the
text around a table as a question whose answer is that table, so that a dual encoder can learn
what questions about a table look like before it sees a single real question. The Wikipedia job's
interactions (`create-pretrain-data --stage=extract`) carry that text as their questions: the page
title, the page's opening text and the table's section heading. The title and heading are the
table tower's own input (its title), so only sentences of the remaining text become questions;
a sentence that repeats the title alone would be answered by reading the title.

The output is what `tapas-tf train-retriever` reads: a folder of CSV tables (one per distinct
table, named by its id), their titles, and the questions. Sentences are chosen per table by a
fingerprint of the table id, the sentence and `seed`, never by file order, and a page's sentence
becomes the question of one of its tables only (a table that finds every sentence of its page
taken, as the page's later tables may, is counted as `tables_skipped_no_sentence`). The set of
sentences used grows with the questions written (one integer each): a job of millions of tables
runs it per shard of pages. Tables that give no
sentence, tables already written (the same id again) and cells that cannot be written are counted
in the report, never dropped unseen.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections import Counter
from typing import Dict, Iterable, List, Optional, Tuple

from tapas_tf.data import table_manifest
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.training_tables import TrainingTableRule

__all__ = ["MIN_WORDS", "choose_sentences", "file_name", "split_sentences", "table_title",
           "write_ict_collection"]

MIN_WORDS = 5  # Shorter "sentences" are list items, captions and stray fragments: no question.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset("st mt ft dr mr mrs ms jr sr no nos vs gen col lt sgt capt prof rev gov sen rep inc "
                           "co corp ltd bros approx ca est fig vol ed".split())
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
REPORT_FILE = "report.json"


def split_sentences(text: str) -> List[str]:
    """The sentences of `text` with at least MIN_WORDS words, in order.

    A sentence ends at `.`, `!` or `?` (and closing quotes or brackets) followed by space and a
    capital letter or digit, except after a title or an initial ("St. Gallen", "Dr. No", "J. R.
    Smith"); what is too short to be a question is left out.
    """
    sentences: List[str] = []
    for piece in _SENTENCE_END.split(" ".join(text.split())):
        if sentences and _ends_with_abbreviation(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return [s.strip() for s in sentences if len(s.split()) >= MIN_WORDS]


def _ends_with_abbreviation(text: str) -> bool:
    last = text.rsplit(" ", 1)[-1]
    return last.endswith(".") and (last[:-1].lower() in _ABBREVIATIONS or re.fullmatch(r"[A-Z]", last[:-1]) is not None)


def _fingerprint(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()[:8], "big")


def choose_sentences(sentences: List[str], table_id: str, count: int, seed: int) -> List[str]:
    """Up to `count` distinct sentences, chosen by a fingerprint of (seed, table id, sentence)."""
    distinct = list(dict.fromkeys(sentences))
    ranked = sorted(distinct, key=lambda s: _fingerprint(str(seed), table_id, s))
    return ranked[:count]


def table_title(table: interaction_pb2.Table) -> str:
    """What the table tower reads as the title: the page title and the table's section heading."""
    parts = [table.document_title.strip(), table.context_heading.strip()]
    return " - ".join(dict.fromkeys(p for p in parts if p))


def _page_text(interaction: interaction_pb2.Interaction) -> str:
    """The interaction's text other than the title and the heading (which the table tower reads)."""
    table = interaction.table
    own = {table.document_title.strip().lower(), table.context_heading.strip().lower(), ""}
    texts = [q.original_text or q.text for q in interaction.questions]
    return " ".join(t for t in texts if t.strip().lower() not in own)


def file_name(table_id: str) -> str:
    """A file name for a table id: unsafe characters become `_`, plus a short hash so that two ids
    that differ only in those characters stay two files."""
    stem = _UNSAFE.sub("_", table_id).strip("._")[-120:] or "table"
    return f"{stem}-{hashlib.sha1(table_id.encode('utf-8')).hexdigest()[:8]}.csv"


def _write_table_csv(path: str, table: interaction_pb2.Table) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([cell.text for cell in table.columns])
        for row in table.rows:
            writer.writerow([cell.text for cell in row.cells])


def _tsv_field(text: str) -> str:
    return " ".join(text.split())  # No tab or newline can break the TSV's columns.


def write_ict_collection(interactions: Iterable[interaction_pb2.Interaction], output_dir: str,
                         sentences_per_table: int = 2, seed: int = 1,
                         rule: Optional[TrainingTableRule] = None) -> Dict[str, int]:
    """Writes the ICT collection of the module docstring; returns its counts (also in report.json).

    Args:
      interactions: any interactions with a table and text (the Wikipedia job's).
      output_dir: gets tables/, titles.tsv, queries.tsv and report.json; must not hold queries.tsv.
      sentences_per_table: questions per table, at most.
      seed: changes which sentences are chosen.
      rule: the training-data rule: a table it excludes is counted as `tables_excluded_<reason>`,
        and the kept tables' manifest is written as training_tables.txt.gz.

    Raises:
      ValueError: sentences_per_table < 1, or `output_dir` already holds a collection.
    """
    if sentences_per_table < 1:
        raise ValueError(f"sentences_per_table must be at least 1, got {sentences_per_table}")
    queries_path = os.path.join(output_dir, "queries.tsv")
    if os.path.exists(queries_path):
        raise ValueError(f"{queries_path} exists: write the collection to a new directory")
    tables_dir = os.path.join(output_dir, "tables")
    os.makedirs(tables_dir, exist_ok=True)
    chooser = _Chooser(sentences_per_table, seed, rule)
    manifest: List[str] = []
    with open(queries_path, "w", encoding="utf-8") as queries, \
            open(os.path.join(output_dir, "titles.tsv"), "w", encoding="utf-8") as titles:
        queries.write("id\tquestion\ttable_id\n")
        titles.write("table_id\ttitle\n")
        for interaction in interactions:
            chosen = chooser.choose(interaction)
            if chosen is None:
                continue
            manifest_name, sentences = chosen
            table = interaction.table
            name = file_name(table.table_id or interaction.id)
            _write_table_csv(os.path.join(tables_dir, name), table)
            titles.write(f"{name}\t{_tsv_field(table_title(table))}\n")
            for i, sentence in enumerate(sentences):
                queries.write(f"{name}#{i}\t{_tsv_field(sentence)}\t{name}\n")
            if manifest_name:
                manifest.append(manifest_name)
    counts = chooser.counts
    if rule is not None:
        table_manifest.write_manifest(os.path.join(output_dir, table_manifest.MANIFEST_FILE), manifest)
    report = {"output_dir": os.path.abspath(output_dir), "sentences_per_table": sentences_per_table, "seed": seed,
              "rule_applied": rule is not None, "counts": dict(sorted(counts.items()))}
    with open(os.path.join(output_dir, REPORT_FILE), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    return dict(counts)


class _Chooser:
    """Which interactions give a table and which of their sentences become its questions, with the
    count of every table read, written or skipped and why."""

    def __init__(self, per_table: int, seed: int, rule: Optional[TrainingTableRule]):
        self.per_table, self.seed, self.rule = per_table, seed, rule
        self.counts: Counter = Counter()
        self._seen: set = set()  # Table ids already read.
        self._used: set = set()  # Fingerprints of (page, sentence) already a question.

    def choose(self, interaction: interaction_pb2.Interaction) -> Optional[Tuple[Optional[str], List[str]]]:
        """(the table's manifest name, None without a rule; its sentences), or None (counted)."""
        self.counts["interactions_read"] += 1
        table = interaction.table
        table_id = table.table_id or interaction.id
        if table_id in self._seen:
            return self._skip("tables_skipped_duplicate_id")
        self._seen.add(table_id)
        decision = self.rule.decide(table_id, table.document_title) if self.rule is not None else None
        if decision is not None and not decision.kept:
            return self._skip(f"tables_excluded_{decision.reason}")
        if not table.columns or not table.rows:
            return self._skip("tables_skipped_no_cells")
        # A page's text is shared by its tables: each sentence asks for one of them only, so that no
        # question has two right tables (the other would be a false negative in its batch).
        page = table.document_title or table_id
        fresh = [s for s in split_sentences(_page_text(interaction)) if _fingerprint(page, s) not in self._used]
        sentences = choose_sentences(fresh, table_id, self.per_table, self.seed)
        if not sentences:
            return self._skip("tables_skipped_no_sentence")
        self._used.update(_fingerprint(page, s) for s in sentences)
        self.counts["tables_written"] += 1
        self.counts["questions_written"] += len(sentences)
        return (decision.manifest_name if decision is not None else None), sentences

    def _skip(self, reason: str) -> None:
        self.counts[reason] += 1
        return None
