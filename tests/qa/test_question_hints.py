"""What a question's words say: its aggregation cue and its kind; a model without an aggregation head
says when it cannot count or add, every answer names its model, and decoding defaults follow how the
model was trained."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tapas_tf.qa.question_hints import aggregation_cue, question_kind  # noqa: E402
from tapas_tf.qa.rendering import render_text  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tests.inference.test_sequential import write_random_model_dir  # noqa: E402

TABLE = pd.DataFrame({"city": ["paris", "rome"], "population": ["2,100", "2,800"]})


@pytest.mark.parametrize("question, cue", [
    ("How many cities are there?", "how many"),
    ("what is the TOTAL population", "total"),
    ("what is the  number   of  cities", "number of"),
    ("average population of the cities?", "average"),
    ("how much did it cost", "how much"),
    ("which city is the largest?", None),
    ("who won the totalizer cup?", None),   # Whole words only.
    ("which country counted most?", None),
    ("", None),
])
def test_aggregation_cues_are_whole_words_and_phrases(question, cue):
    assert aggregation_cue(question) == cue


@pytest.mark.parametrize("question, kind", [
    ("what is the difference in height between torre jaume i and the kaprun pylon?", "comparison"),
    ("how many more gold medals did norway win than sweden?", "comparison"),
    ("how many points higher was team a than team b?", "comparison"),
    ("by how much did the population grow?", "comparison"),
    ("what is the ratio of wins to losses?", "comparison"),
    ("what is the average area?", "average"),
    ("what is the mean score", "average"),
    ("how many gold medals in total?", "sum"),
    ("what is the total population?", "sum"),
    ("what were the combined sales", "sum"),
    ("how many pylons are in austria?", "count"),
    ("how many players were older than 30?", "count"),
    ("how many years older than bob was alice?", "comparison"),
    ("what is the number of cities", "count"),
    ("which pylon is the tallest?", "superlative"),
    ("who finished first?", "superlative"),
    ("what is the height of torre jaume i?", "lookup"),
    ("which team has more wins, a or b?", "lookup"),  # A choice between cells: TAPAS selects it.
    ("", "lookup"),
])
def test_question_kinds(question, kind):
    assert question_kind(question) == kind


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("models")
    return {"cells_only": write_random_model_dir(tmp_path / "cells_only"),
            "any_column": write_random_model_dir(tmp_path / "any_column", select_one_column=False),
            "wtq_like": write_random_model_dir(tmp_path / "wtq_like", num_aggregation_labels=4,
                                               use_answer_as_supervision=True, cell_selection_preference=0.2,
                                               answer_loss_cutoff=0.6, huber_loss_delta=0.12)}


def test_a_model_without_aggregation_head_says_it_cannot_count(models):
    qa = TableQA.from_model_dir(models["cells_only"])
    counted = qa.answer(TABLE, "how many cities are listed?")
    assert counted.operator == "NONE"
    assert any("can only select cells, not count, add or average" in note for note in counted.notes)
    looked_up = qa.answer(TABLE, "which city is it?")
    assert not any("can only select cells" in note for note in looked_up.notes)


def test_a_model_with_an_aggregation_head_adds_no_such_note(models):
    result = TableQA.from_model_dir(models["wtq_like"]).answer(TABLE, "how many cities are listed?")
    assert not any("can only select cells" in note for note in result.notes + result.diagnostics)


def test_every_answer_names_its_model(models):
    qa = TableQA.from_model_dir(models["cells_only"])
    result = qa.answer(TABLE, "which city?")
    assert qa.name == result.model == "cells_only" and result.to_dict()["model"] == "cells_only"
    assert TableQA.from_model_dir(models["cells_only"], name="mine").answer(TABLE, "which city?").model == "mine"
    chat = qa.conversation(TABLE)
    assert "   answered by: cells_only\n" in render_text(chat.table.table, chat.ask("which city?"))


def test_decoding_defaults_follow_the_models_supervision(models):
    """Answer-only (WTQ-style) models get the best-cell fallback and the expected count by default;
    a model that selects one column (SQA-style) the fallback only; other models neither."""
    assert TableQA.from_model_dir(models["wtq_like"]).rule.fallback_to_best_cell
    assert TableQA.from_model_dir(models["wtq_like"]).rule.expected_count
    sqa_like = TableQA.from_model_dir(models["cells_only"]).rule  # tiny_config: select_one_column.
    assert sqa_like.fallback_to_best_cell and not sqa_like.expected_count
    neither = TableQA.from_model_dir(models["any_column"]).rule
    assert not neither.fallback_to_best_cell and not neither.expected_count
    explicit = TableQA.from_model_dir(models["wtq_like"], fallback_to_best_cell=False, expected_count=None)
    assert not explicit.rule.fallback_to_best_cell and explicit.rule.expected_count
