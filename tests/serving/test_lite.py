"""The LiteRT copy of a model (`lite_export`, `lite_model`) and the ask path that runs it without TensorFlow.

Two tiny random models: one that selects cells within one column and has no aggregation head
(SQA's), one with an aggregation head and WTQ's decoding rules that selects cells one by one. Their
head weights are large enough that every cell is decided well away from the threshold, so that the
copy, whose probabilities differ from TensorFlow's by about 1e-7, must give the very same answers.
Both are exported once per module.
"""

import concurrent.futures
import json
import math
import os
import subprocess
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.checkpoints.bundled import BUNDLED_DIR, MAX_BUNDLED_BYTES, bundled_weights_bytes  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tapas_tf.qa import lite_model, tf_runner  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.serving import lite_export  # noqa: E402
from tests.inference.test_sequential import HEADER, ROWS, save_model_dir, tiny_config  # noqa: E402
from tests.vocab_fixture import write_test_vocab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WTQ_OPTIONS = dict(num_aggregation_labels=4, use_answer_as_supervision=True, cell_selection_preference=0.2,
                   answer_loss_cutoff=0.6, huber_loss_delta=0.12)
TOLERANCE = 1e-4

CITIES = pd.DataFrame(ROWS, columns=HEADER)
AMOUNTS = pd.DataFrame({"item": ["a", "b", "c", "d"], "amount": ["1,000", "2.5", "n/a", "7"],
                        "day": ["1998-11-10", "2001-02-03", "1999-05-06", "2000-01-01"]})
# 40 rows: a longer sequence bucket than the small tables.
TEAMS = pd.DataFrame({"team": [f"team {i}" for i in range(40)], "points": [str(3 * i % 17) for i in range(40)],
                      "city": [["paris", "london", "berlin"][i % 3] for i in range(40)]})
QUESTIONS = [
    (CITIES, "which city has the most population?"),
    (CITIES, "what is the total population?"),
    (AMOUNTS, "how many items are there?"),
    (AMOUNTS, "what is the average amount?"),
    (TEAMS, "which team has the most points?"),
    (TEAMS, "how many teams are from paris?"),
]


def write_decisive_model_dir(path, seed: int, aggregation_bias=None, **options) -> str:
    """A tiny random model whose head weights are drawn with stddev 1 (not 0.02), so that cell
    probabilities are far from the threshold; checkpoint, vocabulary and LiteRT copy.

    A random encoder gives nearly the same pooled vector for every question (aggregation logits
    within 0.01 of each other), so `aggregation_bias` <float32>[num_agg] decides the operator.
    """
    config = tiny_config(**options)
    tf_keras.utils.set_random_seed(seed)
    model = TapasForQuestionAnswering(config)
    model(dummy_features(1, 8))
    rng = np.random.default_rng(seed)
    for name, variable in model.weight_map().items():
        if name in ("output_weights", "column_output_weights", "output_weights_agg"):
            variable.assign(rng.normal(0.0, 1.0, variable.shape).astype(np.float32))
    if aggregation_bias is not None:
        model.weight_map()["output_bias_agg"].assign(np.asarray(aggregation_bias, np.float32))
    save_model_dir(path, model, config)
    write_test_vocab(str(path / "vocab.txt"))
    lite_export.export_lite_model(str(path))
    return str(path)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lite")
    return {"cells": write_decisive_model_dir(tmp / "cells", seed=3),
            # Cells chosen one by one (not within one column), so that some hold numbers to add.
            "wtq": write_decisive_model_dir(tmp / "wtq", seed=5, aggregation_bias=[0.0, 1.5, 0.0, 0.0],
                                            select_one_column=False, **WTQ_OPTIONS)}


@pytest.fixture(scope="module")
def pairs(model_dirs):
    """kind -> (the LiteRT TableQA, the TensorFlow TableQA) of the same directory."""
    return {kind: (TableQA.from_model_dir(path), TableQA.from_model_dir(path, backend="tensorflow"))
            for kind, path in model_dirs.items()}


def assert_same_answer(lite, tensorflow):
    assert (lite.question, lite.operator, lite.coordinates) == (tensorflow.question, tensorflow.operator,
                                                                 tensorflow.coordinates)
    assert lite.answers == tensorflow.answers and lite.summary == tensorflow.summary
    assert (lite.value is None) == (tensorflow.value is None)
    if lite.value is not None:
        assert math.isclose(lite.value, tensorflow.value, rel_tol=1e-9) or (
            math.isnan(lite.value) and math.isnan(tensorflow.value))
    assert lite.numbers == tensorflow.numbers
    assert (lite.sequence_length, lite.kept_rows, lite.kept_columns, lite.diagnostics) == (
        tensorflow.sequence_length, tensorflow.kept_rows, tensorflow.kept_columns, tensorflow.diagnostics)
    assert lite.cell_probabilities.keys() == tensorflow.cell_probabilities.keys()
    for key, probability in lite.cell_probabilities.items():
        assert abs(probability - tensorflow.cell_probabilities[key]) < TOLERANCE, key
    assert lite.operator_probabilities.keys() == tensorflow.operator_probabilities.keys()
    for key, probability in lite.operator_probabilities.items():
        assert abs(probability - tensorflow.operator_probabilities[key]) < TOLERANCE, key
    for cell, other in zip(lite.cells, tensorflow.cells):
        assert (cell.row, cell.column, cell.text, cell.number) == (other.row, other.column, other.text, other.number)


# --- the copy answers as TensorFlow does -------------------------------------------------------


@pytest.mark.parametrize("kind", ["cells", "wtq"])
def test_lite_answers_equal_tensorflow_answers(pairs, kind):
    lite, tensorflow = pairs[kind]
    assert (lite.backend, tensorflow.backend) == ("LiteRT", "TensorFlow")
    assert lite.rule == tensorflow.rule and lite.encoder.buckets == tensorflow.encoder.buckets
    results = [(lite.answer(table, q), tensorflow.answer(table, q)) for table, q in QUESTIONS]
    for ours, theirs in results:
        assert_same_answer(ours, theirs)
    assert len({r.sequence_length for r, _ in results}) >= 2  # Two buckets: the copy's length is dynamic.
    if kind == "wtq":  # The aggregation path is exercised: SUM executed on cells that hold numbers.
        assert any(r.operator == "SUM" and r.numbers for r, _ in results), [r.summary for r, _ in results]
    else:  # Counting words without an aggregation head get the same note on both paths.
        assert any("can only select cells" in " ".join(r.notes) for r, _ in results)


@pytest.mark.parametrize("kind", ["cells", "wtq"])
def test_a_conversation_follow_up_sees_the_same_previous_answer(pairs, kind):
    lite, tensorflow = pairs[kind]
    chats = lite.conversation(TEAMS), tensorflow.conversation(TEAMS)
    for question in ("which teams are from paris or london?", "which of them has the most points?"):
        assert_same_answer(*(chat.ask(question) for chat in chats))
    assert chats[0].history[0].cells  # The follow-up did get previous cells to mark.
    encoded = lite.encoder.encode(chats[0].table, "x", chats[0].history[0].coordinates)
    assert encoded.features["prev_label_ids"].sum() > 0


def test_answer_many_equals_tensorflow(pairs):
    lite, tensorflow = pairs["wtq"]
    questions = [q for table, q in QUESTIONS if table is TEAMS]
    for ours, theirs in zip(lite.answer_many(TEAMS, questions), tensorflow.answer_many(TEAMS, questions)):
        assert_same_answer(ours, theirs)


def test_a_pool_of_interpreters_answers_each_row_as_one_interpreter_does(model_dirs, pairs):
    lite = lite_model.read_current_lite_model(model_dirs["wtq"])
    single, pool = lite_model.LiteRunner(lite, interpreters=1), lite_model.LiteRunner(lite, interpreters=3)
    assert (single.concurrent_calls, pool.concurrent_calls) == (1, 3)
    assert 1 <= lite_model.default_interpreters() <= 4
    encoder = pairs["wtq"][0].encoder
    rows = [encoder.encode(encoder.prepare(TEAMS), f"which team has {i} points?").features for i in range(7)]
    length = len(rows[0]["input_ids"])
    expected = single(length, rows)
    assert expected["probabilities"].shape == (7, length) and expected["aggregation_logits"].shape == (7, 4)
    # Seven rows spread over three interpreters come back in order, each exactly as alone.
    for key, value in pool(length, rows).items():
        np.testing.assert_array_equal(value, expected[key])
    # Calls from several threads at once (a server's requests) each get their own rows' outputs.
    with concurrent.futures.ThreadPoolExecutor(6) as threads:
        outputs = list(threads.map(lambda i: pool(length, rows[i:i + 2]), range(6)))
    for i, output in enumerate(outputs):
        np.testing.assert_array_equal(output["probabilities"], expected["probabilities"][i:i + 2])
    with pytest.raises(ValueError, match="at least 1"):
        lite_model.LiteRunner(lite, num_threads=0)


def test_the_copy_describes_itself(model_dirs):
    info_path = os.path.join(model_dirs["wtq"], lite_model.LITE_INFO_FILE)
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    assert info["outputs"] == ["probabilities", "aggregation_logits"]
    assert info["fingerprint"] == lite_model.weights_fingerprint(model_dirs["wtq"])
    assert info["source"]["checkpoint"] == "ckpt-1" and info["config"]["num_aggregation_labels"] == 4
    cells = lite_model.read_lite_model(model_dirs["cells"])
    assert cells.outputs == ("probabilities",) and cells.model_config.max_num_rows == 8
    assert lite_model.newest_checkpoint(model_dirs["wtq"]) == tf.train.latest_checkpoint(
        os.path.join(model_dirs["wtq"], "checkpoints"))


# --- never a stale or missing copy in silence ---------------------------------------------------


def test_a_stale_copy_is_not_used_until_exported_again(model_dirs, tmp_path, caplog):
    import shutil

    model_dir = tmp_path / "moved_on"
    shutil.copytree(model_dirs["cells"], model_dir)
    tensorflow = TableQA.from_model_dir(str(model_dir), backend="tensorflow")
    weights = tensorflow.model.weight_map()["output_weights"]
    weights.assign(-weights)  # Training went on: a newer checkpoint with other weights.
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=tensorflow.model),
                                         str(model_dir / "checkpoints"), max_to_keep=None)
    manager.save(checkpoint_number=2)
    assert lite_model.newest_checkpoint(str(model_dir)) == str(model_dir / "checkpoints" / "ckpt-2")

    with pytest.raises(lite_model.LiteModelError, match="stale"):
        TableQA.from_model_dir(str(model_dir), backend="lite")
    with caplog.at_level("WARNING"):
        qa = TableQA.from_model_dir(str(model_dir))
    assert qa.backend == "TensorFlow" and "stale" in caplog.text
    # An explicit checkpoint that is the one exported is current.
    first = str(model_dir / "checkpoints" / "ckpt-1")
    assert TableQA.from_model_dir(str(model_dir), checkpoint=first).backend == "LiteRT"

    lite_export.export_lite_model(str(model_dir))
    lite = TableQA.from_model_dir(str(model_dir), backend="lite")
    fresh = TableQA.from_model_dir(str(model_dir), backend="tensorflow")
    assert_same_answer(lite.answer(CITIES, "which city?"), fresh.answer(CITIES, "which city?"))


def test_lite_backend_refusals_say_why(model_dirs, tmp_path):
    import shutil

    bare = tmp_path / "no_copy"
    shutil.copytree(model_dirs["cells"], bare, ignore=shutil.ignore_patterns("model.tflite*"))
    with pytest.raises(lite_model.LiteModelError, match="has no model.tflite; write one with"):
        TableQA.from_model_dir(str(bare), backend="lite")
    assert TableQA.from_model_dir(str(bare)).backend == "TensorFlow"
    with pytest.raises(ValueError, match="precision=bfloat16 need the TensorFlow backend"):
        TableQA.from_model_dir(model_dirs["cells"], backend="lite", precision="bfloat16")
    assert TableQA.from_model_dir(model_dirs["cells"], jit_compile=True).backend == "TensorFlow"
    with pytest.raises(ValueError, match="backend must be one of"):
        TableQA.from_model_dir(model_dirs["cells"], backend="tflite")
    (tmp_path / "broken").mkdir()
    shutil.copytree(model_dirs["cells"], tmp_path / "broken" / "m")
    (tmp_path / "broken" / "m" / lite_model.LITE_INFO_FILE).write_text("{not json")
    with pytest.raises(lite_model.LiteModelError, match="is not a LiteRT model info file"):
        TableQA.from_model_dir(str(tmp_path / "broken" / "m"), backend="lite")


def test_a_copy_that_differs_from_tensorflow_is_not_written(model_dirs, tmp_path, monkeypatch):
    import shutil

    model_dir = tmp_path / "strict"
    shutil.copytree(model_dirs["cells"], model_dir, ignore=shutil.ignore_patterns("model.tflite*"))
    monkeypatch.setattr(lite_export, "TOLERANCE", -1.0)  # Any difference, even 0, is too much.
    with pytest.raises(ValueError, match="differ from TensorFlow's"):
        lite_export.export_lite_model(str(model_dir))
    assert not os.path.exists(model_dir / lite_model.LITE_MODEL_FILE)
    assert [n for n in os.listdir(model_dir) if n.endswith(".tmp")] == []


# --- the command line without TensorFlow --------------------------------------------------------

# Runs `python -m tapas_tf.ask ARGS` in this interpreter, then prints which TensorFlow modules it loaded.
_ASK_AND_LIST_MODULES = """
import runpy, sys
sys.argv = ["ask"] + sys.argv[1:]
code = 0
try:
    runpy.run_module("tapas_tf.ask", run_name="__main__")
except SystemExit as e:
    code = e.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tf_keras", "keras", "tensorflow_text"))
print("MODULES " + " ".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def _ask(*args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-c", _ASK_AND_LIST_MODULES, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)


def test_ask_answers_with_the_copy_and_never_imports_tensorflow(model_dirs, pairs, tmp_path):
    table = tmp_path / "amounts.csv"
    AMOUNTS.to_csv(table, index=False)
    question = "what is the average amount?"
    result = _ask(f"--model_dir={model_dirs['wtq']}", f"--table={table}", "--json", question)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.splitlines() == ["MODULES "], result.stderr  # Nothing else on stderr either.
    (line,) = result.stdout.splitlines()
    answer = json.loads(line)
    assert answer["model"] == "wtq (LiteRT)"
    expected = pairs["wtq"][1].answer(AMOUNTS, question).to_dict()
    for key in ("answer", "summary", "operator", "numbers", "sequence_length", "diagnostics"):
        assert answer[key] == expected[key], key
    assert [(c["row"], c["column"]) for c in answer["cells"]] == [(c["row"], c["column"]) for c in expected["cells"]]
    for name, probability in answer["operator_probabilities"].items():
        assert abs(probability - expected["operator_probabilities"][name]) < TOLERANCE

    forced = _ask(f"--model_dir={model_dirs['wtq']}", f"--table={table}", "--backend=tensorflow", question)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "tensorflow" in forced.stderr.split("MODULES ")[1].split() and "(TensorFlow)" in forced.stdout


def test_ask_refusals_are_one_line_before_tensorflow_loads(model_dirs, tmp_path):
    import shutil

    bare = tmp_path / "no_copy"
    shutil.copytree(model_dirs["cells"], bare, ignore=shutil.ignore_patterns("model.tflite*"))
    (tmp_path / "t.csv").write_text("city\nparis\n")
    table = f"--table={tmp_path / 't.csv'}"
    expected = {f"--model_dir={bare}": f"{bare} has no model.tflite; write one with `run_task.py --mode=export "
                                       "--export_lite --model_dir=...`",
                f"--model_dir={tmp_path / 'typo'}": f"{tmp_path / 'typo'} is not a tapas-tf model directory: "
                                                    "tapas_config.json is missing"}
    for model_dir, message in expected.items():
        result = _ask(model_dir, table, "--backend=lite", "which city?")
        assert result.returncode == 1
        assert result.stderr.splitlines() == [f"ask: error: {message}", "MODULES "], result.stderr


# --- the bundled model ships its copy -----------------------------------------------------------


def test_the_bundled_copy_is_current_small_and_answers_as_tensorflow():
    lite_model.read_current_lite_model(BUNDLED_DIR)  # Raises "stale" when the bundled weights change.
    # Stripped: the copy takes its weights from weights_float16.npz, so they are shipped once.
    stripped = os.path.join(BUNDLED_DIR, lite_model.LITE_STRIPPED_FILE)
    assert not os.path.exists(os.path.join(BUNDLED_DIR, lite_model.LITE_MODEL_FILE))
    total = bundled_weights_bytes()  # Every bundled model's weights, LiteRT copies included.
    assert os.path.getsize(stripped) < total / 10 and total <= MAX_BUNDLED_BYTES
    lite, tensorflow = TableQA.from_model_dir(), TableQA.from_model_dir(backend="tensorflow")
    assert lite.backend == "LiteRT" and lite.name == tensorflow.name == f"bundled {os.path.basename(BUNDLED_DIR)}"
    table = os.path.join(ROOT, "tapas_tf", "data", "example_tables", "aerial_lift_pylons.csv")
    for question in ("which pylon is the tallest?", "which country is torre jaume i in?"):
        assert_same_answer(lite.answer(table, question), tensorflow.answer(table, question))


def test_run_task_export_lite_writes_the_copy_ask_uses(model_dirs, pairs, tmp_path):
    import shutil

    model_dir = tmp_path / "from_the_command_line"
    shutil.copytree(model_dirs["cells"], model_dir, ignore=shutil.ignore_patterns("model.tflite*"))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, "run_task.py", "--task=SQA", "--mode=export", "--export_lite",
                             f"--model_dir={model_dir}"], capture_output=True, text=True, timeout=600, cwd=ROOT,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the LiteRT copy that ask runs without TensorFlow" in result.stderr
    assert not os.path.exists(tmp_path / "1")  # No SavedModel without --export_dir.
    lite_model.read_current_lite_model(str(model_dir))
    lite = TableQA.from_model_dir(str(model_dir), backend="lite")
    assert_same_answer(lite.answer(CITIES, "which city?"), pairs["cells"][1].answer(CITIES, "which city?"))


# --- heads sized to the table -------------------------------------------------------------------


def test_a_table_within_the_trained_limits_runs_on_the_small_heads(model_dirs, pairs, monkeypatch):
    """Two signatures share the weights: the heads at the trained limits (tiny_config: 8 rows,
    and its columns) for a table that fits them, 256 x 256 for a bigger one; both answer as
    TensorFlow does (whose heads are always 256 x 256)."""
    lite_copy = lite_model.read_lite_model(model_dirs["cells"])
    config = lite_copy.model_config
    small_key, full_key = (key for key, _, _ in lite_copy.signatures)
    assert [s[1:] for s in lite_copy.signatures] == [(config.max_num_rows, config.max_num_columns), (256, 256)]
    with open(os.path.join(model_dirs["cells"], lite_model.LITE_INFO_FILE), encoding="utf-8") as f:
        assert json.load(f)["signatures"] == {small_key: [config.max_num_rows, config.max_num_columns],
                                              full_key: [256, 256]}
    chosen = []
    choose = lite_model.LiteModel.signature_for
    monkeypatch.setattr(lite_model.LiteModel, "signature_for",
                        lambda self, rows, columns: chosen.append(choose(self, rows, columns)) or chosen[-1])
    lite, tensorflow = pairs["cells"]
    fits = pd.DataFrame({"city": ["paris", "rome"], "people": ["2", "3"]})
    tall = pd.DataFrame({"city": [f"town {i}" for i in range(config.max_num_rows + 4)],
                         "people": [str(i) for i in range(config.max_num_rows + 4)]})
    for table in (fits, tall):
        assert_same_answer(lite.answer(table, "which city?"), tensorflow.answer(table, "which city?"))
    assert chosen == [small_key, full_key]


def test_a_copy_with_one_signature_still_answers(model_dirs, tmp_path):
    """Copies written before the second signature have one, unnamed, and no `signatures` entry."""
    import shutil

    model_dir = tmp_path / "old"
    shutil.copytree(model_dirs["cells"], model_dir)
    info_path = model_dir / lite_model.LITE_INFO_FILE
    info = json.loads(info_path.read_text(encoding="utf-8"))
    config = lite_model.read_lite_model(str(model_dir)).model_config
    model = tf_runner.load_inference_model(str(model_dir), None, model_dir_lib.load_config(str(model_dir)))
    one = lite_export._forward_function(model, "serving")  # pylint: disable=protected-access
    (model_dir / lite_model.LITE_MODEL_FILE).write_bytes(
        lite_export._convert({"serving": one}, {"serving": model}))  # pylint: disable=protected-access
    del info["signatures"]
    info_path.write_text(json.dumps(info), encoding="utf-8")
    old = lite_model.read_lite_model(str(model_dir))
    assert old.signatures == () and old.signature_for(np.array([0, 9]), np.array([0, 1])) is None
    table = pd.DataFrame({"city": ["paris", "rome"], "people": ["2", "3"]})
    assert_same_answer(TableQA.from_model_dir(str(model_dir)).answer(table, "which city?"),
                       TableQA.from_model_dir(str(model_dir), backend="tensorflow").answer(table, "which city?"))
    assert config.max_num_rows == 8


# --- a compact directory's copy shares its float16 weights ----------------------------------------


def test_a_compact_directory_gets_a_stripped_copy_that_answers_as_tensorflow(model_dirs, tmp_path):
    import shutil

    from tapas_tf.checkpoints import compact

    model_dir = tmp_path / "compact"
    compact.write_compact_model_dir(model_dirs["wtq"], str(model_dir))
    shutil.copy(os.path.join(model_dirs["wtq"], "vocab.txt"), model_dir)  # The model's small test vocabulary.
    path = lite_export.export_lite_model(str(model_dir))
    stripped = model_dir / lite_model.LITE_STRIPPED_FILE
    assert path == str(stripped) and not (model_dir / lite_model.LITE_MODEL_FILE).exists()
    info = json.loads((model_dir / lite_model.LITE_INFO_FILE).read_text(encoding="utf-8"))
    whole = info["source"]["bytes"]
    # What stays is mostly the graph: 91 KB of the whole 355 KB for this tiny model with a small vocabulary.
    stripped_bytes = stripped.stat().st_size
    assert stripped_bytes < whole / 3
    assert info["model"] == lite_model.LITE_STRIPPED_FILE and info["shared_weights"]["file"] == "weights_float16.npz"
    assert {name for _, name, _ in info["shared_weights"]["segments"]} >= {"bert/embeddings/word_embeddings"}
    lite, tensorflow = TableQA.from_model_dir(str(model_dir)), TableQA.from_model_dir(str(model_dir), backend="tensorflow")
    assert lite.backend == "LiteRT"
    for table, question in QUESTIONS:
        assert_same_answer(lite.answer(table, question), tensorflow.answer(table, question))

    # A stripped file that does not rebuild into the exported copy is refused, with its name.
    damaged = tmp_path / "damaged"
    shutil.copytree(model_dir, damaged)
    data = bytearray((damaged / lite_model.LITE_STRIPPED_FILE).read_bytes())
    data[100] ^= 0xFF
    (damaged / lite_model.LITE_STRIPPED_FILE).write_bytes(bytes(data))
    with pytest.raises(lite_model.LiteModelError, match=f"{damaged / lite_model.LITE_STRIPPED_FILE} rebuilt from "
                                                        "the compact weights is not the copy that was exported"):
        lite_model.LiteRunner(lite_model.read_current_lite_model(str(damaged)))
    (damaged / lite_model.LITE_STRIPPED_FILE).unlink()
    with pytest.raises(lite_model.LiteModelError, match="has no model.tflite"):
        lite_model.read_lite_model(str(damaged))

    # The whole copy on request; it replaces the stripped one, and answers the same.
    path = lite_export.export_lite_model(str(model_dir), share_weights=False)
    assert path == str(model_dir / lite_model.LITE_MODEL_FILE) and not stripped.exists()
    assert os.path.getsize(path) > 3 * stripped_bytes  # Each conversion differs by a few bytes of metadata.
    for table, question in QUESTIONS[:2]:
        assert_same_answer(TableQA.from_model_dir(str(model_dir)).answer(table, question),
                           tensorflow.answer(table, question))


def test_a_model_with_question_match_embeddings_answers_as_tensorflow(tmp_path):
    """The matches are computed inside the model, so the copy needs no new input."""
    from tapas_tf.features.question_match import ignored_ids

    ids = ignored_ids(write_test_vocab(str(tmp_path / "vocab.txt")))
    path = write_decisive_model_dir(tmp_path / "matching", seed=3, use_question_match_embeddings=True,
                                    question_match_ignored_ids=ids)
    lite, tensorflow = TableQA.from_model_dir(path), TableQA.from_model_dir(path, backend="tensorflow")
    assert lite.backend == "LiteRT"
    for table, question in QUESTIONS[:2] + QUESTIONS[4:5]:
        assert_same_answer(lite.answer(table, question), tensorflow.answer(table, question))
