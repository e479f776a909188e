"""The task registry: one registration per task, and a task of a user's own run end to end.

`tests/toy_task.py` registers TOY in a module of its own, as a user would; run_task.py loads it
with --task_module and runs create_data, train (a tiny model, 2 steps) and predict_and_evaluate on
a release this file writes. The registry's own rules are checked in process.
"""

import json
import os
import subprocess
import sys

import pytest

from tapas_tf.pipelines.reports import REPORT_FILE
from tapas_tf.task_registry import registry
from tapas_tf.task_registry.modules import load_task_module, task_module_arguments
from tapas_tf.task_registry.presets import PRESETS, Split, Task, TaskPreset
from tests.vocab_fixture import vocab_tokens, write_test_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_TASK = os.path.join(ROOT, "run_task.py")
TOY_MODULE = os.path.join(ROOT, "tests", "toy_task.py")
ERROR_PREFIX = "run_task.py: error: "


@pytest.fixture
def clean_registry():
    """The registry as the built-in tasks left it, again after the test."""
    saved = dict(registry._TASKS)
    yield
    registry._TASKS.clear()
    registry._TASKS.update(saved)


def _preset(**changes) -> TaskPreset:
    values = dict(splits=(Split("train", "train.tsv", True), Split("dev", "dev.tsv", False)), train_steps=10,
                  learning_rate=1e-4, warmup_ratio=0.1, train_batch_size=2)
    return TaskPreset(**{**values, **changes})


def _reader(path, input_dir, is_training):
    raise AssertionError("not opened in these tests")


# --- the built-in tasks ------------------------------------------------------------------------


def test_the_paper_tasks_are_registered_with_their_modes_and_evaluations():
    assert registry.task_names() == [task.value for task in Task] + ["SYNTHETIC", "TABFACT"]
    question_answering = {"create_data", "train", "predict", "predict_and_evaluate", "export"}
    evaluations = {"SQA": "sqa", "WTQ": "denotation", "WIKISQL": "denotation",
                   "WIKISQL_SUPERVISED": "denotation"}
    for name, evaluation in evaluations.items():
        spec = registry.get_task(name)
        assert (spec.modes, spec.evaluation) == (question_answering, evaluation)
        assert spec.preset is PRESETS[Task(name)]
        assert callable(spec.reader) and not spec.pretraining
    pretrain = registry.get_task(Task.PRETRAIN)
    assert (pretrain.modes, pretrain.reader, pretrain.evaluation, pretrain.pretraining) == (
        {"train", "evaluate"}, None, None, True)
    assert registry.tasks_for("evaluate") == ["PRETRAIN", "TABFACT"]
    assert registry.tasks_for("create_data") == ["SQA", "WTQ", "WIKISQL", "WIKISQL_SUPERVISED", "SYNTHETIC",
                                                 "TABFACT"]
    synthetic = registry.get_task("SYNTHETIC")
    assert (synthetic.modes, synthetic.evaluation, synthetic.preset.num_aggregation_labels) == (
        question_answering, "denotation", 4)
    assert synthetic.preset.select_one_column and not synthetic.preset.use_answer_as_supervision


def test_the_evaluations_are_the_ones_prediction_knows():
    from tapas_tf.inference.sequential import EVALUATIONS

    assert set(registry.EVALUATIONS) == set(EVALUATIONS) | {"classification"}


def test_wtq_reads_training_and_evaluation_splits_differently(tmp_path):
    wtq = registry.get_task("WTQ")
    assert wtq.reader(str(tmp_path / "train.tsv"), str(tmp_path), True).supervision == "train"
    assert wtq.reader(str(tmp_path / "dev.tsv"), str(tmp_path), False).supervision == "eval"
    assert registry.get_task("WIKISQL_SUPERVISED").reader(str(tmp_path / "dev.jsonl"), "", False).supervised


def test_an_unknown_task_names_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown task 'SQB'; registered: SQA, WTQ, WIKISQL, "
                                         r"WIKISQL_SUPERVISED, PRETRAIN, SYNTHETIC, TABFACT "
                                         r"\(.*--task_module"):
        registry.get_task("SQB")


# --- conversion options: one place ---------------------------------------------------------------


def test_conversion_options_take_the_task_then_the_given_options(tmp_path, clean_registry):
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    spec = registry.register(registry.TaskSpec("OWN", _preset(max_seq_length=96), reader=_reader,
                                               evaluation="sqa", conversion={"max_row_id": 16}))
    config = registry.conversion_config(spec, vocab)
    assert (config.vocab_file, config.max_seq_length, config.max_row_id, config.max_column_id,
            config.drop_rows_to_fit) == (vocab, 96, 16, 32, None)
    config = registry.conversion_config("OWN", vocab, max_seq_length=None, max_row_id=8,
                                        drop_rows_to_fit=False)
    assert (config.max_seq_length, config.max_row_id, config.drop_rows_to_fit) == (96, 8, False)
    assert registry.conversion_config(Task.SQA, vocab).max_seq_length == 512
    with pytest.raises(ValueError, match=r"unknown conversion options \['max_rows'\]"):
        registry.conversion_config("OWN", vocab, max_rows=3)


# --- registering -------------------------------------------------------------------------------


@pytest.mark.parametrize("changes, problem", [
    (dict(name="my task"), "a name is letters, digits and _"),
    (dict(reader=None), "create_data needs a reader"),
    (dict(evaluation=None), "predict and predict_and_evaluate need an evaluation"),
    (dict(evaluation="bleu"), "evaluation 'bleu' is not one of sqa, denotation"),
    (dict(modes={"train", "evaluate"}),
     r"a question-answering task is built for .* at most, not \['evaluate'\]"),
    (dict(modes={"train", "serve"}), r"unknown modes \['serve'\]"),
    (dict(conversion={"vocab_file": "v.txt"}), r"conversion options \['vocab_file'\] are not among"),
    (dict(preset=_preset(splits=(Split("training", "t.tsv", True),))),
     "create_data needs a split named train"),
    (dict(preset=_preset(splits=(Split("train", "t.tsv", True), Split("dev", "d.tsv", True)))),
     r"split 'dev': train \(and only train\) has is_training=True"),
])
def test_a_wrong_registration_is_one_line_naming_the_task(changes, problem):
    values = {**dict(name="OWN", preset=_preset(), reader=_reader, evaluation="denotation"), **changes}
    with pytest.raises(ValueError, match=f"task '{values['name']}': {problem}"):
        registry.TaskSpec(**values)


def test_a_task_without_predict_needs_no_evaluation_and_a_name_is_taken_once(clean_registry):
    modes = {"create_data", "train"}
    spec = registry.register(registry.TaskSpec("OWN", _preset(), reader=_reader, modes=modes))
    # The same registration again (a module imported twice) is no change.
    assert registry.register(registry.TaskSpec("OWN", _preset(), reader=_reader, modes=modes)) is spec
    with pytest.raises(ValueError, match="task 'OWN' is registered already"):
        registry.register(registry.TaskSpec("OWN", _preset(train_steps=5), reader=_reader,
                                            modes={"create_data", "train"}))
    with pytest.raises(ValueError, match="task 'SQA' is registered already"):
        registry.register(registry.TaskSpec("SQA", _preset(), reader=_reader, evaluation="sqa"))
    assert registry.task_names()[-1] == "OWN" and registry.tasks_for("predict")[-1] == "TABFACT"


# --- task modules ------------------------------------------------------------------------------


def test_task_module_arguments_are_found_before_the_flags_are_defined():
    argv = ["run_task.py", "--task=TOY", "--task_module=a.py", "--task_module", "b.tasks", "-task_module=c",
            "--task_modules=no", "--", "--task_module=after"]
    assert task_module_arguments(argv) == ["a.py", "b.tasks", "c"]
    assert task_module_arguments(["p", "--task_module"]) == [""]


def test_a_module_name_is_found_in_the_working_directory(tmp_path, monkeypatch, clean_registry):
    (tmp_path / "my_dotted_tasks.py").write_text(
        "from tapas_tf.task_registry import TaskSpec, register\n"
        "from tapas_tf.task_registry.presets import PRESETS, Task\n"
        "register(TaskSpec('DOTTED', PRESETS[Task.PRETRAIN]))\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_dotted_tasks", raising=False)
    module = load_task_module("my_dotted_tasks")
    assert registry.get_task("DOTTED").modes == {"train", "evaluate"}
    assert load_task_module("my_dotted_tasks") is module  # Loaded once.
    with pytest.raises(ValueError, match="no_such_tasks: no module of that name in the working directory"):
        load_task_module("no_such_tasks")
    with pytest.raises(ValueError, match="missing.py: no such file"):
        load_task_module("missing.py")
    sys.modules.pop("my_dotted_tasks")


# --- a task of one's own, end to end ----------------------------------------------------------


def _toy_release(root) -> str:
    """train: 3 good questions, 1 line with too few fields, 1 question on a missing table and 1
    with an answer cell outside its table; dev: 2 questions."""
    data = root / "toy"
    (data / "tables").mkdir(parents=True)
    (data / "tables" / "cities.csv").write_text(
        "city,country,population\nparis,france,2148000\nberlin,germany,3645000\nlondon,england,8982000\n")
    (data / "tables" / "people.csv").write_text("name,age,city\njohn,30,paris\nmary,41,london\n")
    header = "id\tquestion\ttable_file\tanswer_cell\n"
    (data / "train.tsv").write_text(header + "".join([
        "t1\twhich city is in france?\ttables/cities.csv\t0,0\n",
        "t2\twhich city is in germany?\ttables/cities.csv\t1,0\n",
        "t3\twhat is the age of mary?\ttables/people.csv\t1,1\n",
        "t4\tonly two fields\n",
        "t5\twhich country has london?\ttables/countries.csv\t2,1\n",
        "t6\twho is the third name?\ttables/people.csv\t2,0\n",
    ]))
    (data / "dev.tsv").write_text(header + "d1\twhich city is in england?\ttables/cities.csv\t2,0\n"
                                           "d2\twhat is the age of john?\ttables/people.csv\t0,1\n")
    return str(data)


def _run_task(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TAPAS_TF_DEBUG", None)
    return subprocess.run([sys.executable, RUN_TASK, f"--task_module={TOY_MODULE}", "--task=TOY", *args],
                          cwd=str(cwd), env=env, capture_output=True, text=True, timeout=600)


def test_a_task_of_ones_own_creates_data_trains_predicts_and_evaluates(tmp_path):
    data, vocab = _toy_release(tmp_path), write_test_vocab(str(tmp_path / "vocab.txt"))
    out, model = tmp_path / "out", tmp_path / "model"
    # No --max_seq_length, --max_row_id: the task's (64, 16).
    result = _run_task("--mode=create_data", f"--input_dir={data}", f"--output_dir={out}",
                       f"--vocab_file={vocab}", "--direct_num_workers=1", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / REPORT_FILE).read_text())
    config = report["config"]
    assert (report["task"], config["max_seq_length"], config["max_row_id"]) == ("TOY", 64, 16)
    train, dev = report["splits"]["train"], report["splits"]["dev"]
    assert (train["lines_read"], train["lines"]) == (7, {"header": 1, "questions": 5, "tables": 0,
                                                         "skipped": {"malformed_line": 1}})
    assert (train["questions_read"], train["examples_written"], train["skipped"], train["dropped"]) == (
        5, 3, {"bad_answer_cell": 1, "missing_table": 1}, {})
    assert train["adds_up"] and dev["adds_up"] and (dev["questions_read"], dev["examples_written"]) == (2, 2)
    assert "test" not in report["splits"]  # Not required, and not there.
    failures = (out / "failures" / "train.tsv").read_text().splitlines()[1:]
    assert sorted((row.split("\t")[1], row.split("\t")[2], row.split("\t")[3]) for row in failures) == [
        ("5", "", "malformed_line"), ("6", "t5_0", "missing_table"), ("7", "t6_0", "bad_answer_cell")]

    result = _run_task("--mode=train", f"--output_dir={out}", f"--model_dir={model}", "--model_size=tiny",
                       f"--model_option=vocab_size={len(vocab_tokens())}", "--train_steps=2",
                       "--train_batch_size=2", "--save_checkpoints_steps=2", "--noprogress_bar", "--seed=1",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((model / "tapas_config.json").read_text())
    assert (config["temperature"], config["num_aggregation_labels"]) == (0.5, 0)  # The toy preset's heads.
    assert os.path.exists(model / "checkpoints" / "ckpt-2.index")

    result = _run_task("--mode=predict_and_evaluate", f"--output_dir={out}", f"--model_dir={model}",
                       f"--vocab_file={vocab}", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((model / "predictions" / "dev_metrics.json").read_text())
    assert (metrics["num_questions"], metrics["num_conversion_failures"]) == (2, 0)
    assert metrics["denotation_accuracy"] == metrics["num_correct"] / 2  # The task's evaluation: denotation.
    predictions = (model / "predictions" / "dev.tsv").read_text().splitlines()
    assert len(predictions) == 3 and {line.split("\t")[0] for line in predictions[1:]} == {"d1_0", "d2_0"}
    assert (model / "predictions" / "dev_official.tsv").exists()


def test_help_lists_a_registered_task_and_the_modes_are_checked(tmp_path):
    result = _run_task("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ("<SQA|WTQ|WIKISQL|WIKISQL_SUPERVISED|PRETRAIN|SYNTHETIC|TABFACT|TOY>"
            in " ".join(result.stdout.split()))
    result = _run_task("--mode=evaluate", "--model_dir=m", "--output_dir=o", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"{ERROR_PREFIX}--task=TOY --mode=evaluate is not built yet; --mode=evaluate is built for PRETRAIN, TABFACT")


@pytest.mark.parametrize("module, exit_code, message", [
    ("missing_tasks.py", 2, "--task_module=missing_tasks.py: missing_tasks.py: no such file"),
    ("no_such.tasks", 2, "--task_module=no_such.tasks: no_such.tasks: no module of that name"),
    ("broken_tasks.py", 1, "--task_module=broken_tasks.py: ZeroDivisionError: division by zero"),
    ("wrong_tasks.py", 1, "--task_module=wrong_tasks.py: ValueError: task 'SQA' is registered already"),
])
def test_a_task_module_that_cannot_load_is_one_line(tmp_path, module, exit_code, message):
    (tmp_path / "broken_tasks.py").write_text("1 / 0\n")
    (tmp_path / "wrong_tasks.py").write_text(
        "from tapas_tf.task_registry import TaskSpec, register\nfrom tapas_tf.task_registry.presets import PRESETS, Task\n"
        "register(TaskSpec('SQA', PRESETS[Task.PRETRAIN]))\n")
    env = {**os.environ}
    env.pop("TAPAS_TF_DEBUG", None)
    result = subprocess.run([sys.executable, RUN_TASK, f"--task_module={module}", "--task=SQA",
                             "--mode=train"], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == exit_code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1 and errors[0].startswith(ERROR_PREFIX + message), result.stderr[-3000:]
    assert lines[-1] == errors[0] if exit_code == 2 else lines[-1].strip() == (
        "(rerun with --verbosity=debug or TAPAS_TF_DEBUG=1 for the traceback)")
