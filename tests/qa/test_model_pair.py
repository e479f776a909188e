"""A pair of models behind one TableQA: the conversational model answers follow-ups; a first
question goes to both calibrated models (the surer answer kept), or, without calibrations, to the
model with an aggregation head when it reads like counting or arithmetic."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from tapas_tf.checkpoints.bundled import BUNDLED_DIR  # noqa: E402
from tapas_tf.qa import confidence, table_qa  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tests.inference.test_sequential import write_random_model_dir  # noqa: E402

BUNDLED_NAME = f"bundled {os.path.basename(BUNDLED_DIR)}"  # What answers name the model by.

TABLE = pd.DataFrame({"city": ["paris", "rome", "oslo"], "population": ["2,100", "2,800", "700"]})


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("pair")
    return {"cells": write_random_model_dir(tmp_path / "cells"),
            "counts": write_random_model_dir(tmp_path / "counts", num_aggregation_labels=4,
                                             use_answer_as_supervision=True, cell_selection_preference=0.2,
                                             answer_loss_cutoff=0.6, huber_loss_delta=0.12)}


@pytest.fixture(scope="module")
def pair(models):
    return TableQA.from_model_dir(models["cells"], aggregation_model_dir=models["counts"])


def _no_head_note(result) -> bool:
    return any("can only select cells" in note or "only for a first question" in note
               for note in result.notes)


def test_aggregation_questions_go_to_the_model_with_the_head(pair):
    counted = pair.answer(TABLE, "how many cities are listed?")
    assert counted.model == "counts" and not _no_head_note(counted)
    looked_up = pair.answer(TABLE, "which city is the largest?")
    assert looked_up.model == "cells" and not _no_head_note(looked_up)


def test_the_aggregation_model_loads_on_its_first_question(models):
    qa = TableQA.from_model_dir(models["cells"], aggregation_model_dir=models["counts"])
    qa.answer(TABLE, "which city?")
    assert callable(qa._aggregation_model)  # pylint: disable=protected-access
    qa.answer(TABLE, "what is the total population?")
    assert isinstance(qa.aggregation_model, TableQA) and qa.aggregation_model.runner.has_aggregation_head
    # Two model directories, one vocabulary: the table's tokens, numbers and ranks are made once.
    assert qa.aggregation_model.encoder.converter is qa.encoder.converter


def test_answer_many_keeps_the_order_across_both_models(pair):
    questions = ["which city?", "how many cities?", "which population?", "average population?"]
    results = pair.answer_many(TABLE, questions)
    assert [r.question for r in results] == questions
    assert [r.model for r in results] == ["cells", "counts", "cells", "counts"]
    alone = [pair.answer(TABLE, q) for q in questions]  # Batched or not, the same answers.
    assert [(r.model, r.operator, r.coordinates) for r in results] == [(r.model, r.operator, r.coordinates)
                                                                       for r in alone]


def test_a_follow_up_stays_with_the_conversational_model(pair):
    """The aggregation model never saw previous answers: "how many of them" after an answer is the
    conversational model's, which says it cannot count."""
    chat = pair.conversation(TABLE)
    first = chat.ask("how many cities are there?")
    assert first.model == "counts"
    follow_up = chat.ask("how many of them are in europe?")
    assert follow_up.model == "cells" and _no_head_note(follow_up)
    assert any("start a new conversation" in note for note in follow_up.notes)
    assert pair.answer(TABLE, "how many of them?", previous_answer=[(0, 0)]).model == "cells"


def test_results_name_the_backend_of_either_model(models):
    qa = TableQA.from_model_dir(models["cells"], aggregation_model_dir=models["counts"])
    qa.show_backend = True
    assert qa.answer(TABLE, "which city?").model == f"cells ({qa.backend})"
    assert qa.answer(TABLE, "how many cities?").model == f"counts ({qa.aggregation_model.backend})"


def test_no_pair_unless_asked_and_a_missing_second_model_is_named(models, tmp_path):
    alone = TableQA.from_model_dir(models["cells"])
    assert alone.aggregation_model is None and alone.answer(TABLE, "how many cities?").model == "cells"
    assert TableQA.from_model_dir(models["cells"], aggregation_model_dir="none").aggregation_model is None
    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'nowhere'} is not a tapas-tf model directory"):
        TableQA.from_model_dir(models["cells"], aggregation_model_dir=str(tmp_path / "nowhere"))


def test_the_bundled_pair(models, monkeypatch):
    """Without a model directory: the bundled conversational model, and the bundled aggregation
    model when the installation has one (here, a stand-in); "none" turns it off."""
    monkeypatch.setattr(table_qa, "bundled_aggregation_model_dir", lambda: models["counts"])
    qa = TableQA.from_model_dir()
    assert qa.name == BUNDLED_NAME
    assert qa.answer(TABLE, "which city?").model == BUNDLED_NAME
    assert qa.answer(TABLE, "how many cities?").model == "counts"
    assert TableQA.from_model_dir(aggregation_model_dir="none").answer(TABLE, "how many cities?").model == \
        BUNDLED_NAME
    monkeypatch.setattr(table_qa, "bundled_aggregation_model_dir", lambda: None)
    assert TableQA.from_model_dir().aggregation_model is None


def test_warm_up_loads_and_warms_the_aggregation_model(models):
    qa = TableQA.from_model_dir(models["cells"], aggregation_model_dir=models["counts"])
    qa.warm_up(lengths=(32,))
    assert isinstance(qa._aggregation_model, TableQA)  # pylint: disable=protected-access


def _calibrate(model_dir, bias):
    """A calibration that gives every answer of `model_dir` the confidence sigmoid(bias)."""
    weights = {name: 0.0 for name in confidence.FEATURES}
    confidence.Calibration(dict(weights, bias=bias), 0.5, "test").save(model_dir)


def test_a_calibrated_pair_asks_both_and_keeps_the_surer_answer(tmp_path):
    """With a calibration beside each model, a first question goes to both and the answer with the
    higher confidence is kept, whatever its words; a follow-up stays with the conversation model; a
    counting question that the cells-only model wins says that the counting model was less sure."""
    cells = write_random_model_dir(tmp_path / "cells")
    counts = write_random_model_dir(tmp_path / "counts", num_aggregation_labels=4,
                                    use_answer_as_supervision=True, cell_selection_preference=0.2,
                                    answer_loss_cutoff=0.6, huber_loss_delta=0.12)
    _calibrate(cells, -2.0)
    _calibrate(counts, 2.0)
    pair = TableQA.from_model_dir(cells, aggregation_model_dir=counts)
    assert pair.routes_by_confidence
    assert ([r.model for r in pair.answer_many(TABLE, ["which city?", "how many cities?"])]
            == ["counts", "counts"])
    chat = pair.conversation(TABLE)
    first = chat.ask("which city is the largest?")
    assert first.model == "counts" and first.confidence == pytest.approx(0.8808, abs=1e-4)
    if first.cells:  # A follow-up needs an earlier answer's cells.
        assert chat.ask("which of them is in italy?").model == "cells"

    _calibrate(cells, 3.0)
    pair = TableQA.from_model_dir(cells, aggregation_model_dir=counts)
    counted = pair.answer(TABLE, "how many cities are there?")
    assert counted.model == "cells" and counted.operator == "NONE"
    assert counted.notes[0].startswith("This answer shows cells: the model that counts, adds and averages "
                                       "was less sure of its own (")
    assert not any(note.startswith("This model can only select cells") for note in counted.notes)

    os.remove(os.path.join(counts, confidence.CALIBRATION_FILE))  # One uncalibrated model: routing by words.
    pair = TableQA.from_model_dir(cells, aggregation_model_dir=counts)
    assert not pair.routes_by_confidence and pair.answer(TABLE, "how many cities?").model == "counts"


def test_a_big_table_goes_to_the_pair_in_windows(pair):
    """A count over 300 rows (more than one example holds): the aggregation model reads every row."""
    big = pd.DataFrame({"city": [f"town{i}" for i in range(300)], "population": [str(i) for i in range(300)]})
    counted = pair.answer(big, "how many cities are listed?")
    assert counted.model == "counts" and counted.reading.rows_read == 300 and counted.reading.windows > 1
    looked_up = pair.answer(big, "which city is the largest?")
    assert looked_up.model == "cells" and looked_up.reading.rows_read == 300
