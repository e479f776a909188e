"""Inverse-cloze pairs: sentences of a table's page become its questions, under the training-data
rule, written as the collection `train-retriever` reads."""

import csv
import gzip
import json

import pytest

from tapas_tf.data.interaction_io import write_interactions
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.training_tables import TrainingTableRule
from tapas_tf.retrieval.collection import open_collection
from tapas_tf.retrieval.ict_pairs import choose_sentences, file_name, split_sentences, write_ict_collection
from tests.command_runner import run_command
from tests.data.test_training_tables import write_releases

BETA_TEXT = ("Beta is a club based in St. Gallen that plays in the first league. It won the cup in 1998 "
             "and again in 2004. Its ground holds 19,000 people. Founded 1879.")


def _interaction(table_id, title, heading, text, rows=(("lions", "10"), ("bears", "7"))):
    """A Wikipedia-job interaction: questions are the page title, its opening text and the heading."""
    interaction = interaction_pb2.Interaction(id=table_id)
    table = interaction.table
    table.table_id, table.document_title, table.context_heading = table_id, title, heading
    for name in ("team", "points"):
        table.columns.add().text = name
    for row in rows:
        cells = table.rows.add()
        for value in row:
            cells.cells.add().text = value
    for i, question in enumerate((title, text, heading)):
        interaction.questions.add(id=f"{table_id}_{i}", original_text=question, text=question)
    return interaction


def test_sentences_are_split_at_their_ends_and_short_ones_left_out():
    assert split_sentences(BETA_TEXT) == [
        "Beta is a club based in St. Gallen that plays in the first league.",
        "It won the cup in 1998 and again in 2004.",
        "Its ground holds 19,000 people.",
    ]  # "Founded 1879." has 2 words: no question; "St." is a title, not a sentence's end.
    assert split_sentences('He said "we won the cup again." Then the club moved to a new ground.') == [
        'He said "we won the cup again."', "Then the club moved to a new ground."]
    assert split_sentences("The film was directed by J. R. Smith in 1962. Dr. No was its first villain.") == [
        "The film was directed by J. R. Smith in 1962.", "Dr. No was its first villain."]


def test_the_choice_depends_on_the_table_and_seed_not_the_order():
    sentences = [f"sentence number {i} of the page text" for i in range(6)]
    chosen = choose_sentences(sentences, "t1", 2, seed=1)
    assert len(chosen) == 2 and chosen == choose_sentences(list(reversed(sentences)), "t1", 2, seed=1)
    assert choose_sentences(sentences + sentences, "t1", 10, seed=1) == choose_sentences(sentences, "t1", 10, 1)
    assert len(set(choose_sentences(sentences, "t1", 6, seed=1))) == 6
    assert any(choose_sentences(sentences, "t1", 2, seed=s) != chosen for s in range(2, 6))


def test_file_names_are_safe_and_distinct():
    a, b = file_name("http://en.wikipedia.org/wiki/A/B_0"), file_name("http://en.wikipedia.org/wiki/A_B_0")
    assert a != b and a.endswith(".csv") and "/" not in a and ":" not in a


def test_the_collection_keeps_the_rule_counts_every_skip_and_trains(tmp_path):
    rule = TrainingTableRule.from_releases(write_releases(tmp_path / "releases"))
    interactions = [
        _interaction("http://en.wikipedia.org/wiki/Beta_2", "Beta", "Results", BETA_TEXT),
        _interaction("http://en.wikipedia.org/wiki/Alpha_1", "Alpha", "Results", BETA_TEXT),  # An evaluation page.
        _interaction("http://en.wikipedia.org/wiki/Gamma_3", "Gamma", "Gamma", "Gamma."),  # No sentence.
        _interaction("http://en.wikipedia.org/wiki/Beta_2", "Beta", "Results", BETA_TEXT),  # The same table again.
        _interaction("http://en.wikipedia.org/wiki/Delta_0", "Delta", "Squad", "Delta is a team of the north "
                     "that plays in blue shirts.", rows=()),  # No body rows.
        _interaction("http://en.wikipedia.org/wiki/Gamma_4", "Gamma", "Honours",
                     "Gamma won the league title three times in a row."),
        # Another table of Beta's page: only the sentence Beta_2 did not take is left for it.
        _interaction("http://en.wikipedia.org/wiki/Beta_5", "Beta", "Stadium", BETA_TEXT),
    ]
    out = tmp_path / "ict"
    counts = write_ict_collection(iter(interactions), str(out), sentences_per_table=2, seed=1, rule=rule)
    assert counts == {"interactions_read": 7, "questions_written": 4, "tables_written": 3,
                      "tables_excluded_page_holds_evaluation_table": 1, "tables_skipped_no_sentence": 1,
                      "tables_skipped_duplicate_id": 1, "tables_skipped_no_cells": 1}
    with open(out / "queries.tsv", encoding="utf-8") as f:
        queries = list(csv.DictReader(f, delimiter="\t"))
    beta, gamma = file_name("http://en.wikipedia.org/wiki/Beta_2"), file_name("http://en.wikipedia.org/wiki/Gamma_4")
    beta5 = file_name("http://en.wikipedia.org/wiki/Beta_5")
    assert [q["table_id"] for q in queries] == [beta, beta, gamma, beta5]
    assert sorted(q["question"] for q in queries if q["table_id"] in (beta, beta5)) == sorted(split_sentences(BETA_TEXT))
    assert queries[2]["question"] == "Gamma won the league title three times in a row."
    assert (out / "titles.tsv").read_text().splitlines() == ["table_id\ttitle", f"{beta}\tBeta - Results",
                                                             f"{gamma}\tGamma - Honours", f"{beta5}\tBeta - Stadium"]
    with gzip.open(out / "training_tables.txt.gz", "rt") as f:
        assert f.read().splitlines() == ["page:200-page/2#2", "page:200-page/2#5", "page:Gamma#4"]
    assert json.loads((out / "report.json").read_text())["counts"] == counts
    # The collection reads back as train-retriever reads it: every question's table, with its title.
    tables = {t.table_id: t for t in open_collection(str(out / "tables"), str(out / "titles.tsv"))}
    assert set(tables) == {beta, gamma, beta5} and tables[beta].title == "Beta - Results"
    assert list(tables[beta].frame.columns) == ["team", "points"] and tables[beta].frame.iloc[1].tolist() == ["bears", "7"]
    with pytest.raises(ValueError, match="exists: write the collection to a new directory"):
        write_ict_collection(iter(interactions), str(out))


def test_the_command_writes_the_collection_and_names_a_missing_input(tmp_path):
    path = tmp_path / "pages.txtpb"
    write_interactions(str(path), [_interaction("http://en.wikipedia.org/wiki/Beta_2", "Beta", "Results", BETA_TEXT)])
    releases = write_releases(tmp_path / "releases")
    result = run_command("make-ict-pairs", f"--interactions={path}", f"--output_dir={tmp_path / 'ict'}",
                         "--sentences_per_table=3", f"--wtq_release={releases.wtq_dir}",
                         f"--tabfact_release={releases.tabfact_dir}", f"--wtq_pages={releases.wtq_pages_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("3 questions on 1 tables from 1 interactions")
    assert (tmp_path / "ict" / "training_tables.txt.gz").exists()
    missing = run_command("make-ict-pairs", f"--interactions={tmp_path / 'none*.tfrecord'}",
                          f"--output_dir={tmp_path / 'ict2'}")
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines()[-1] == (
        f"tapas-tf make-ict-pairs: error: --interactions={tmp_path / 'none*.tfrecord'}: no file matches")
