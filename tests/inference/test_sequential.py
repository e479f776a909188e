"""Sequential SQA prediction and evaluation (tapas_tf/inference/sequential.py) and the CLI modes.

Every test uses this table (0-based body coordinates):

    | city   | country | population |
    | paris  | france  | 2          |   row 0
    | berlin | germany | 4          |   row 1
    | london | england | 8          |   row 2

Two kinds of model: a tiny TapasForQuestionAnswering trained here to fit a few
questions (prediction straight from its checkpoint), and fake models whose
selections are fixed by rule, so predictions and metrics are known by hand.
"""

import json
import logging
import os
import subprocess
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.data.interaction_io import write_interactions  # noqa: E402
from tapas_tf.data.sample_data import write_sample  # noqa: E402
from tapas_tf.features.conversion_config import ConversionConfig  # noqa: E402
from tapas_tf.inference import sequential as predict  # noqa: E402
from tapas_tf.inference.decoding import COUNT, NONE, DecodingRule
from tapas_tf.inference.prediction_files import read_predictions_tsv  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tests.conversion_fixtures import make_converter, make_interaction  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402, F401 (other test modules import it from here too)
from tests.vocab_fixture import vocab_tokens, write_test_vocab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = ["city", "country", "population"]
ROWS = [["paris", "france", "2"], ["berlin", "germany", "4"], ["london", "england", "8"]]
SEQ = 48


def sqa_interaction(sequence_id, questions):
    """An annotated interaction with SQA ids ("{sequence_id}_{position}") and gold answer texts.

    questions: (text, coordinates[, valid]) tuples; valid=False marks the answer invalid,
    which makes the question fail conversion (INVALID_ANSWER).
    """
    interaction = make_interaction(HEADER, ROWS, [(text, coordinates) for text, coordinates, *_ in questions])
    interaction.id = sequence_id
    for position, (question, (_, coordinates, *valid)) in enumerate(zip(interaction.questions, questions)):
        question.id = f"{sequence_id}_{position}"
        question.answer.answer_texts.extend(ROWS[r][c] for r, c in coordinates)
        if valid:
            question.answer.is_valid = valid[0]
    return interaction


def write_random_model_dir(path, **options) -> str:
    """A tiny untrained model (seed 1) of `tiny_config(**options)` at `path`, with the test vocabulary."""
    config = tiny_config(**options)
    tf_keras.utils.set_random_seed(1)  # tf_keras initialisers draw from Python's random too.
    model = TapasForQuestionAnswering(config)
    model(dummy_features(1, 8))
    save_model_dir(path, model, config)
    write_test_vocab(str(path / "vocab.txt"))
    return str(path)


def save_model_dir(path, model, config, **checkpoint_objects) -> str:
    model_dir_lib.save_config(str(path), config)
    return tf.train.Checkpoint(model=model, **checkpoint_objects).save(
        os.path.join(model_dir_lib.checkpoint_dir(str(path)), "ckpt"))


# --- a trained tiny model, straight from its checkpoint -------------------------------------

TRAIN_SEQUENCES = [
    ("a-1-0", [("which city?", [(0, 0), (1, 0), (2, 0)]),
               ("which country?", [(0, 1), (1, 1), (2, 1)]),
               ("what population?", [(2, 2)])]),
    ("b-2-0", [("what population?", [(0, 2)]),
               ("which city?", [(1, 0)])]),
]
MAX_TRAIN_STEPS = 1000


# Session scope: the ask API, the web server and the browser tests share the one trained model.
@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """Fits a tiny model to TRAIN_SEQUENCES (gold previous answers) and saves a model directory."""
    tmp = tmp_path_factory.mktemp("trained")
    converter = make_converter(str(tmp), max_seq_length=SEQ)
    interactions = [sqa_interaction(sid, questions) for sid, questions in TRAIN_SEQUENCES]
    examples = [converter.convert(i, k).features for i in interactions for k in range(len(i.questions))]
    batch = {name: tf.constant(np.stack([e[name] for e in examples]), tf.int32)
             for name in predict.MODEL_INPUT_FEATURES + ("label_ids",)}
    config = tiny_config()
    tf.random.set_seed(0)
    model = TapasForQuestionAnswering(config)
    optimizer = tf_keras.optimizers.Adam(3e-3)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = model(batch, training=True)["total_loss"]
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    cells = (batch["row_ids"] > 0) & (batch["input_mask"] > 0)

    def fits() -> bool:
        """Every table token of every training question is selected exactly when its label says so."""
        selected = model(batch, training=False)["probabilities"] > 0.5
        return bool(tf.reduce_all(tf.boolean_mask(selected == (batch["label_ids"] > 0), cells)))

    # Trains until the model answers every training question and the loss is down 20-fold, rather than
    # for a fixed number of steps: the initial weights depend on what ran before in the process and the
    # kernels on the CPU (oneDNN or Eigen), so a fixed count, or the loss alone, fits on one machine only.
    first_loss = last_loss = float(train_step())
    steps = 1
    while not (last_loss < first_loss / 20 and fits()) and steps < MAX_TRAIN_STEPS:
        last_loss = float(train_step())
        steps += 1
    assert last_loss < first_loss / 20 and fits(), (steps, first_loss, last_loss)
    model_dir = tmp / "model"
    save_model_dir(model_dir, model, config, step=tf.Variable(steps, dtype=tf.int64))
    interactions_file = str(tmp / "dev.tfrecord")
    write_interactions(interactions_file, interactions)
    return {"model_dir": str(model_dir), "interactions": interactions, "file": interactions_file,
            "vocab": converter.config.vocab_file, "steps": steps}


def _hand_cell_probabilities(probabilities, features):
    """(row, column) -> mean token probability, computed independently of tapas_tf.inference.decoding."""
    cells = {}
    for p, row, column, mask in zip(probabilities, features["row_ids"], features["column_ids"],
                                    features["input_mask"]):
        if row > 0 and column > 0 and mask:
            cells.setdefault((int(row) - 1, int(column) - 1), []).append(float(p))
    return {cell: sum(values) / len(values) for cell, values in cells.items()}


def test_prediction_from_a_checkpoint_matches_the_model(trained):
    outcome = predict.predict_model_dir(
        trained["model_dir"], trained["file"], "dev",
        ConversionConfig(vocab_file=trained["vocab"], max_seq_length=SEQ),
        batch_size=2, evaluate=True, show_progress=False)
    assert outcome.predictions_path == os.path.join(trained["model_dir"], "predictions", "dev.tsv")
    assert outcome.step == trained["steps"]
    rows = read_predictions_tsv(outcome.predictions_path)
    assert [r.question_id for r in rows] == ["a-1-0_0", "a-1-0_1", "a-1-0_2", "b-2-0_0", "b-2-0_1"]
    # The model fits its training questions, so every answer is the gold one.
    assert [r.coordinates for r in rows] == [((0, 0), (1, 0), (2, 0)), ((0, 1), (1, 1), (2, 1)), ((2, 2),),
                                             ((0, 2),), ((1, 0),)]
    assert [r.answer for r in rows] == [("paris", "berlin", "london"), ("france", "germany", "england"), ("8",),
                                        ("2",), ("berlin",)]
    assert {r.aggregation for r in rows} == {NONE}  # No aggregation head.

    # Re-run the restored model on each question, the previous *predicted* cells fed back,
    # and check the TSV against its probabilities.
    model = model_dir_lib.load_model(trained["model_dir"])
    converter = make_converter(os.path.dirname(trained["vocab"]), max_seq_length=SEQ)
    by_id = {r.question_id: r for r in rows}
    for interaction in trained["interactions"]:
        previous = ()
        for k, question in enumerate(interaction.questions):
            features = converter.convert(interaction, k, prev_answer_coordinates=previous).features
            inputs = {name: tf.constant(features[name][None], tf.int32) for name in predict.MODEL_INPUT_FEATURES}
            probabilities = model(inputs, training=False)["probabilities"].numpy()[0]
            expected = _hand_cell_probabilities(probabilities, features)
            row = by_id[question.id]
            assert row.cell_probabilities.keys() == expected.keys()
            for cell, p in expected.items():
                assert row.cell_probabilities[cell] == pytest.approx(p, abs=1e-4)
            assert row.coordinates == tuple(sorted(c for c, p in expected.items() if p > 0.5))
            previous = row.coordinates

    assert outcome.metrics["ALL"] == 1.0 and outcome.metrics["SEQ"] == 1.0
    saved = json.load(open(os.path.join(trained["model_dir"], "predictions", "dev_metrics.json")))
    assert saved["num_questions"] == 5 and saved["Q3"] == 1.0 and saved["Q4+"] is None
    step = trained["steps"]
    assert _event_scalars(os.path.join(trained["model_dir"], "eval_dev")) == {
        ("ALL", step): 1.0, ("SEQ", step): 1.0, ("Q1", step): 1.0, ("Q2", step): 1.0, ("Q3", step): 1.0}


def _event_scalars(log_dir):
    """{(tag, step): value} of the TensorBoard event files in `log_dir`."""
    scalars = {}
    for name in os.listdir(log_dir):
        for record in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                scalars[value.tag, event.step] = float(tf.make_ndarray(value.tensor))
    return scalars


def test_compiled_model_traces_once_and_pads_the_last_batch(trained):
    model = model_dir_lib.load_model(trained["model_dir"])
    model_fn = predict.compiled_model_fn(model, batch_size=2, seq_length=SEQ)
    converter = make_converter(os.path.dirname(trained["vocab"]), max_seq_length=SEQ)
    run = predict.predict_interactions(trained["interactions"], converter, predict.BatchPredictor(model_fn, 2),
                                       show_progress=False)
    assert len(run.predictions) == 5
    # Steps of 2, 2 and 1 questions: the 1-question batch is padded, with no new trace.
    assert model_fn.traced.experimental_get_tracing_count() == 1


def test_model_and_vocabulary_must_agree(trained, tmp_path):
    big_vocab = write_test_vocab(str(tmp_path / "vocab.txt"), extra_words=["extra"])
    with pytest.raises(ValueError, match="word embeddings"):
        predict.predict_model_dir(trained["model_dir"], trained["file"], "dev",
                                  ConversionConfig(vocab_file=big_vocab, max_seq_length=SEQ), show_progress=False)
    with pytest.raises(ValueError, match="max_position_embeddings 256"):
        predict.predict_model_dir(trained["model_dir"], trained["file"], "dev",
                                  ConversionConfig(vocab_file=trained["vocab"], max_seq_length=512),
                                  show_progress=False)


# --- sequential previous answers, with a fake model -------------------------------------------


class ShiftDownModel:
    """Selects, in each table, the cell below the one marked in prev_label_ids, or cell (0, 0)
    when nothing is marked. So answers chain: (0, 0), (1, 0), (2, 0), ... when the model's
    own answers are fed back. Records the shape of every batch it gets."""

    def __init__(self, probability: float = 0.9):
        self.probability = probability
        self.batch_shapes = []

    def __call__(self, features):
        self.batch_shapes.append(features["input_ids"].shape)
        rows, columns = features["row_ids"], features["column_ids"]
        probabilities = np.zeros(rows.shape, np.float32)
        for b in range(rows.shape[0]):
            marked = features["prev_label_ids"][b] == 1
            targets = {(int(r) + 1, int(c)) for r, c in zip(rows[b][marked], columns[b][marked])} or {(1, 1)}
            for r, c in targets:
                probabilities[b][(rows[b] == r) & (columns[b] == c)] = self.probability
        return {"probabilities": probabilities}


# Gold answers differ from what ShiftDownModel predicts, so the two sources of
# prev_label_ids give different predictions.
SEQUENCES = [
    ("s-1-0", [("which city?", [(1, 1)]), ("which country?", [(0, 2)]), ("what population?", [(0, 0)])]),
    ("s-2-0", [("which city?", [(2, 0)]), ("which country?", [(1, 1)])]),
    ("s-3-0", [("which city?", [(0, 0)])]),
]


@pytest.fixture
def spied_converter(tmp_path, monkeypatch):
    """A converter whose convert() records (question id, prev_answer_coordinates)."""
    converter = make_converter(str(tmp_path), max_seq_length=SEQ)
    calls = []
    original = converter.convert

    def convert(interaction, index, prev_answer_coordinates=None):
        calls.append((interaction.questions[index].id, prev_answer_coordinates))
        return original(interaction, index, prev_answer_coordinates=prev_answer_coordinates)

    monkeypatch.setattr(converter, "convert", convert)
    return converter, calls


def test_previous_answer_is_the_models_own_prediction(spied_converter):
    converter, calls = spied_converter
    model = ShiftDownModel()
    interactions = [sqa_interaction(sid, questions) for sid, questions in SEQUENCES]
    run = predict.predict_interactions(interactions, converter, predict.BatchPredictor(model, 2),
                                       show_progress=False)
    coordinates = {p.question_id: p.coordinates for p in run.predictions}
    assert coordinates == {"s-1-0_0": ((0, 0),), "s-1-0_1": ((1, 0),), "s-1-0_2": ((2, 0),),
                           "s-2-0_0": ((0, 0),), "s-2-0_1": ((1, 0),), "s-3-0_0": ((0, 0),)}
    # Step-major order: question k of every sequence before any question k + 1.
    assert calls == [("s-1-0_0", ()), ("s-2-0_0", ()), ("s-3-0_0", ()),
                     ("s-1-0_1", ((0, 0),)), ("s-2-0_1", ((0, 0),)), ("s-1-0_2", ((1, 0),))]
    # Steps of 3, 2 and 1 questions in batches of 2: 2 + 1 + 1 calls, all of shape [2, SEQ].
    assert model.batch_shapes == [(2, SEQ)] * 4
    assert [p.answer for p in run.predictions] == [("paris",), ("berlin",), ("london",), ("paris",), ("berlin",),
                                                   ("paris",)]


def test_gold_previous_answer_option(spied_converter):
    converter, calls = spied_converter
    interactions = [sqa_interaction(sid, questions) for sid, questions in SEQUENCES]
    run = predict.predict_interactions(interactions, converter, predict.BatchPredictor(ShiftDownModel(), 4),
                                       use_gold_previous_answer=True, show_progress=False)
    assert dict(calls) == {"s-1-0_0": (), "s-2-0_0": (), "s-3-0_0": (),
                           "s-1-0_1": ((1, 1),), "s-2-0_1": ((2, 0),), "s-1-0_2": ((0, 2),)}
    # One row below each gold previous answer; (2, 0) has nothing below it.
    assert {p.question_id: p.coordinates for p in run.predictions} == {
        "s-1-0_0": ((0, 0),), "s-1-0_1": ((2, 1),), "s-1-0_2": ((1, 2),),
        "s-2-0_0": ((0, 0),), "s-2-0_1": (), "s-3-0_0": ((0, 0),)}


def test_fallback_to_best_cell_answers_and_feeds_its_cell_forward(spied_converter):
    converter, calls = spied_converter
    interactions = [sqa_interaction(sid, questions) for sid, questions in SEQUENCES]
    unsure = ShiftDownModel(probability=0.4)  # Its chosen cell is never above the threshold.
    plain = predict.predict_interactions(interactions, converter, predict.BatchPredictor(unsure, 2),
                                         show_progress=False)
    assert {p.coordinates for p in plain.predictions} == {()}
    calls.clear()
    run = predict.predict_interactions(interactions, converter, predict.BatchPredictor(unsure, 2),
                                       rule=DecodingRule(fallback_to_best_cell=True), show_progress=False)
    # The most probable cell is the model's choice, and it is the next question's previous answer.
    assert [p.coordinates for p in run.predictions] == [((0, 0),), ((1, 0),), ((2, 0),), ((0, 0),), ((1, 0),),
                                                        ((0, 0),)]
    assert dict(calls)["s-1-0_2"] == ((1, 0),)
    assert run.predictions[2].answer == ("london",)


def test_unconverted_question_gets_an_empty_row_and_resets_the_previous_answer(spied_converter, caplog):
    converter, calls = spied_converter
    interaction = sqa_interaction("s-1-0", [("which city?", [(0, 0)]), ("which one?", [(1, 0)], False),
                                            ("and then?", [(0, 0)])])
    with caplog.at_level(logging.WARNING):
        run = predict.predict_interactions([interaction], converter, predict.BatchPredictor(ShiftDownModel(), 2),
                                           show_progress=False)
    assert [p.coordinates for p in run.predictions] == [((0, 0),), (), ((0, 0),)]
    assert run.predictions[1] == predict.empty_prediction("s-1-0_1")
    assert calls[2] == ("s-1-0_2", ())
    assert run.failure_counts == {"invalid_answer": 1}
    assert "s-1-0_1" in caplog.text and "invalid_answer" in caplog.text
    metrics = predict.evaluate_sqa([interaction], run)
    # Question 2's gold (0, 0) is predicted; the unconverted question 1 counts as wrong.
    scores = tuple(metrics[name] for name in ("ALL", "SEQ", "Q1", "Q2", "Q3"))
    assert scores == (2 / 3, 0.0, 1.0, 0.0, 1.0)


def test_batch_predictor_rejects_too_many_examples():
    predictor = predict.BatchPredictor(ShiftDownModel(), 2)
    with pytest.raises(ValueError, match="expected 1 to 2 examples, got 3"):
        predictor([{}] * 3)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        predict.BatchPredictor(ShiftDownModel(), 0)


# --- metrics of a model directory whose predictions are fixed --------------------------------


class FirstCellModel:
    """A stand-in for TapasForQuestionAnswering (TensorFlow ops, so it runs under tf.function):
    body cell (0, 0) gets probability 0.75, every other token 0.25; the aggregation is COUNT
    when the question's first word piece is `count_trigger_id`, else NONE."""

    def __init__(self, count_trigger_id):
        self.count_trigger_id = count_trigger_id

    def __call__(self, features, training=False):
        first_cell = (features["row_ids"] == 1) & (features["column_ids"] == 1)
        mask = tf.cast(features["input_mask"], tf.float32)
        probabilities = tf.where(first_cell, 0.75, 0.25) * mask
        is_count = features["input_ids"][:, 1:2] == self.count_trigger_id
        aggregation_logits = tf.where(is_count, tf.constant([[0.0, 0.0, 0.0, 5.0]]), tf.constant([[5.0, 0, 0, 0]]))
        return {"probabilities": probabilities, "aggregation_logits": aggregation_logits}


def test_metrics_json_and_summaries_of_known_predictions(tmp_path, monkeypatch):
    sequences = [
        sqa_interaction("m-1-0", [("which city?", [(1, 0)]),  # wrong
                                  ("which one?", [(0, 0)])]),  # right
        sqa_interaction("m-2-0", [("which city?", [(0, 0)])] * 4),  # all right
        sqa_interaction("m-3-0", [("how many cities in france?", []),  # COUNT of (0, 0) = 1: right
                                  ("which?", [(0, 0)], False)]),  # not converted: wrong
    ]
    sequences[2].questions[0].answer.answer_texts.append("1")
    sequences[2].questions[0].answer.float_value = 1.0
    interactions_file = str(tmp_path / "dev.tfrecord")
    write_interactions(interactions_file, sequences)
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    model_dir = tmp_path / "model"
    model_dir_lib.save_config(str(model_dir), tiny_config())
    tf.train.Checkpoint(step=tf.Variable(7, dtype=tf.int64)).save(str(model_dir / "checkpoints" / "ckpt"))
    how_id = vocab_tokens().index("how")
    monkeypatch.setattr(predict.model_dir_lib, "load_model", lambda *args: FirstCellModel(how_id))

    outcome = predict.predict_model_dir(str(model_dir), interactions_file, "dev",
                                        ConversionConfig(vocab_file=vocab, max_seq_length=SEQ),
                                        batch_size=3, evaluate=True, show_progress=False)

    expected = {"ALL": 6 / 8, "SEQ": 1 / 3, "Q1": 2 / 3, "Q2": 2 / 3, "Q3": 1.0, "Q4+": 1.0,
                "num_questions": 8, "num_sequences": 3, "num_conversion_failures": 1,
                "conversion_failures": {"invalid_answer": 1}, "previous_answers": "predicted",
                "decoding": {"threshold": 0.5, "fallback_to_best_cell": False, "expected_count": False}}
    assert json.load(open(model_dir / "predictions" / "dev_metrics.json")) == expected
    assert outcome.metrics == expected
    rows = {r.question_id: r for r in read_predictions_tsv(str(model_dir / "predictions" / "dev.tsv"))}
    assert len(rows) == 8
    assert (rows["m-3-0_0"].aggregation, rows["m-3-0_0"].answer) == (COUNT, 1.0)
    assert rows["m-3-0_0"].aggregation_probabilities[3] == pytest.approx(np.exp(5) / (np.exp(5) + 3), abs=1e-4)
    assert (rows["m-1-0_0"].coordinates, rows["m-1-0_0"].answer) == (((0, 0),), ("paris",))
    assert rows["m-3-0_1"].answer is None and rows["m-3-0_1"].coordinates == ()
    assert _event_scalars(str(model_dir / "eval_dev")) == {
        ("ALL", 7): 0.75, ("SEQ", 7): pytest.approx(1 / 3), ("Q1", 7): pytest.approx(2 / 3),
        ("Q2", 7): pytest.approx(2 / 3), ("Q3", 7): 1.0, ("Q4+", 7): 1.0}


def test_checkpoint_step_without_a_step_variable_is_the_prefix_number(tmp_path):
    model = TapasForQuestionAnswering(tiny_config())
    model(dummy_features(1, 8))
    prefix = save_model_dir(tmp_path, model, tiny_config())
    assert prefix.endswith("ckpt-1")
    assert predict.checkpoint_step(prefix) == 1


# --- the CLI on data made by create_data -------------------------------------------------------


@pytest.fixture(scope="module")
def sample_task(tmp_path_factory):
    """create_data on the bundled sample (test vocabulary) plus an untrained tiny model directory."""
    from tapas_tf.beam_jobs.create_task_data import run_create_data
    from tapas_tf.task_registry.presets import Task

    tmp = tmp_path_factory.mktemp("cli")
    write_sample(str(tmp / "data"))
    vocab = write_test_vocab(str(tmp / "vocab.txt"))
    run_create_data(Task.SQA, str(tmp / "data"), str(tmp / "out"),
                    ConversionConfig(vocab_file=vocab, max_seq_length=256), ["--direct_num_workers=1"])
    model = TapasForQuestionAnswering(tiny_config())
    model(dummy_features(1, 8))
    save_model_dir(tmp / "model", model, tiny_config())
    return tmp, vocab


def _run_task(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA", *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_predict_and_evaluate(sample_task):
    tmp, vocab = sample_task
    result = _run_task("--mode=predict_and_evaluate", f"--output_dir={tmp / 'out'}",
                       f"--model_dir={tmp / 'model'}",
                       f"--vocab_file={vocab}", "--max_seq_length=256", "--predict_batch_size=3")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_predictions_tsv(str(tmp / "model" / "predictions" / "dev.tsv"))
    assert sorted(r.question_id for r in rows) == ["s-5-0_0", "s-5-0_1", "s-6-0_0", "s-6-0_1"]
    metrics = json.load(open(tmp / "model" / "predictions" / "dev_metrics.json"))
    assert (metrics["num_questions"], metrics["num_sequences"], metrics["num_conversion_failures"]) == (4, 2, 0)
    assert set(metrics) >= {"ALL", "SEQ", "Q1", "Q2", "Q3", "Q4+"}
    assert {tag for tag, step in _event_scalars(str(tmp / "model" / "eval_dev"))} == {"ALL", "SEQ", "Q1", "Q2"}
    assert "dev metrics at step 1: ALL=" in result.stderr

    # The same split with gold previous answers goes to its own files: the first run's stay.
    gold = _run_task("--mode=predict_and_evaluate", f"--output_dir={tmp / 'out'}",
                     f"--model_dir={tmp / 'model'}", "--use_gold_previous_answer",
                     f"--vocab_file={vocab}", "--max_seq_length=256", "--predict_batch_size=3")
    assert gold.returncode == 0, gold.stderr[-3000:]
    predictions = tmp / "model" / "predictions"
    assert json.load(open(predictions / "dev_metrics.json")) == metrics
    gold_metrics = json.load(open(predictions / "dev_gold_previous_metrics.json"))
    assert (metrics["previous_answers"], gold_metrics["previous_answers"]) == ("predicted", "gold")
    assert gold_metrics["num_questions"] == 4
    assert len(read_predictions_tsv(str(predictions / "dev_gold_previous.tsv"))) == 4
    assert {tag for tag, step in _event_scalars(str(tmp / "model" / "eval_dev_gold_previous"))} >= {"ALL"}


def test_cli_predict_an_interactions_file_with_gold_previous_answers(sample_task):
    tmp, vocab = sample_task
    # --interactions_file replaces the split's file; --predict_split still names the outputs.
    result = _run_task("--mode=predict", f"--interactions_file={tmp / 'out' / 'interactions' / 'test.tfrecord'}",
                       f"--model_dir={tmp / 'model'}", f"--vocab_file={vocab}", "--max_seq_length=256",
                       "--predict_split=train", "--use_gold_previous_answer", "--checkpoint="
                       + str(tmp / "model" / "checkpoints" / "ckpt-1"))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_predictions_tsv(str(tmp / "model" / "predictions" / "train_gold_previous.tsv"))
    assert [r.question_id for r in rows] == ["s-7-0_0"]
    assert not os.path.exists(tmp / "model" / "predictions" / "train_gold_previous_metrics.json")


def test_cli_predict_needs_a_model_dir(tmp_path):
    result = _run_task("--mode=predict", f"--output_dir={tmp_path}")
    assert result.returncode != 0
    assert "--model_dir" in result.stderr
