"""run_task.py on a wrong command line or a faulty environment: one short line, a non-zero exit.

Every fault runs the CLI in a subprocess, as a user would, and checks that stderr has no
traceback and one `run_task.py: error:` line naming the path or value (absl and TensorFlow log
lines may come before it). Usage errors exit 2, everything else 1. The data are tiny and made in
process (no Beam run); the model is a tiny untrained one, shared by the module.
"""

import os
import shutil
import subprocess
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.data.interaction_io import write_interactions  # noqa: E402
from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tests.conversion_fixtures import make_interaction  # noqa: E402
from tests.training.test_input_pipeline import SEQ, TABLES, write_fixture_examples  # noqa: E402
from tests.vocab_fixture import vocab_tokens, write_test_vocab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_TASK = os.path.join(ROOT, "run_task.py")
ERROR_PREFIX = "run_task.py: error: "
DEBUG_HINT = "(rerun with --verbosity=debug or TAPAS_TF_DEBUG=1 for the traceback)"
# A directory nobody can create, root included: /proc accepts no new entries.
UNCREATABLE_DIR = "/proc/tapas_tf_test/out"
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=SEQ, vocab_size=len(vocab_tokens()),
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Tiny valid inputs: a vocabulary, train TFRecords, dev interactions, a model config and a
    model directory (an untrained tiny model: these tests never get as far as its answers)."""
    root = tmp_path_factory.mktemp("cli")
    write_fixture_examples(root)  # root/tf_examples/train.tfrecord at SEQ tokens, and root/vocab.txt.
    interactions = [make_interaction(header, rows, questions, table_id=f"table_{t}")
                    for t, (header, rows, questions) in enumerate(TABLES)]
    for t, interaction in enumerate(interactions):
        interaction.id = f"i{t}-0"
    write_interactions(str(root / "interactions" / "dev.tfrecord"), interactions)
    config = TapasConfig.from_preset("tiny", **TINY)
    config.to_json_file(str(root / "tiny.json"))
    model = TapasForQuestionAnswering(config)
    model(dummy_features(1, 8), training=False)
    model_dir = str(root / "model")
    model_dir_lib.save_config(model_dir, config)
    tf.train.Checkpoint(model=model).save(os.path.join(model_dir_lib.checkpoint_dir(model_dir), "ckpt"))
    return {
        "root": root,
        "vocab": write_test_vocab(root / "vocab.txt"),
        "train_file": root / "tf_examples" / "train.tfrecord",
        "interactions": root / "interactions" / "dev.tfrecord",
        "model_config": root / "tiny.json",
        "model_dir": root / "model",
    }


def run_task(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    """Runs run_task.py with `args` in `cwd`; TAPAS_TF_DEBUG is unset unless `env` sets it."""
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    if not env or "TAPAS_TF_DEBUG" not in env:
        environment.pop("TAPAS_TF_DEBUG", None)
    return subprocess.run([sys.executable, RUN_TASK, *args], cwd=str(cwd), env=environment,
                          capture_output=True, text=True, timeout=240)


def assert_short_error(result: subprocess.CompletedProcess, exit_code: int, *expected: str) -> str:
    """Asserts a one-line error holding every `expected` text, at most one hint line after it, no
    traceback, and `exit_code`; returns the error's message."""
    stderr = result.stderr
    assert result.returncode == exit_code, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1, stderr[-3000:]
    after = lines[errors[0] + 1:]
    assert after in ([], [f"  {DEBUG_HINT}"]), stderr[-3000:]
    assert (after == []) == (exit_code == 2), "usage errors have no hint; other errors point at the traceback"
    message = lines[errors[0]][len(ERROR_PREFIX):]
    for text in expected:
        assert text in message, message
    return message


def truncated_copy(path, destination, cut_bytes: int = 20) -> str:
    """Copies `path` to `destination` without its last `cut_bytes` bytes: an interrupted copy."""
    data = open(path, "rb").read()
    with open(destination, "wb") as f:
        f.write(data[:-cut_bytes])
    return str(destination)


# --- the command line --------------------------------------------------------------------------


def test_task_typo_names_the_value_and_the_nearest_task(tmp_path):
    result = run_task("--task=SQB", "--mode=train", cwd=tmp_path)
    assert_short_error(result, 2, "--task=SQB", "did you mean --task=SQA?")


def test_mode_typo_names_the_value_and_the_nearest_mode(tmp_path):
    result = run_task("--task=SQA", "--mode=trian", cwd=tmp_path)
    assert_short_error(result, 2, "--mode=trian", "did you mean --mode=train?")


def test_bad_number_names_the_flag(tmp_path):
    result = run_task("--task=SQA", "--mode=train", "--max_seq_length=abc", cwd=tmp_path)
    assert_short_error(result, 2, "--max_seq_length=abc")


def test_mistyped_create_data_flag_is_not_passed_to_beam(tmp_path):
    result = run_task("--task=SQA", "--mode=create_data", "--input_dir=in", "--output_dir=out",
                      "--max_seq_lenght=128", cwd=tmp_path)
    assert_short_error(result, 2, "--max_seq_lenght=128", "did you mean --max_seq_length?")
    assert not (tmp_path / "out").exists()  # Refused before any work.


def test_mistyped_beam_flag_names_the_nearest_beam_option(tmp_path):
    result = run_task("--task=SQA", "--mode=create_data", "--input_dir=in", "--output_dir=out",
                      "--direct_num_worker=2", cwd=tmp_path)
    assert_short_error(result, 2, "--direct_num_worker=2", "did you mean --direct_num_workers?")


def test_unknown_flag_of_train_names_the_nearest_flag(tmp_path):
    result = run_task("--task=SQA", "--mode=train", "--model_dir=m", "--train_step=3", cwd=tmp_path)
    assert_short_error(result, 2, "--train_step=3", "did you mean --train_steps?")


@pytest.mark.parametrize("task, mode", [("PRETRAIN", "predict"), ("SQA", "evaluate"), ("PRETRAIN", "export")])
def test_task_and_mode_not_built_yet_are_refused(tmp_path, task, mode):
    result = run_task(f"--task={task}", f"--mode={mode}", "--input_dir=in", "--output_dir=out",
                      "--model_dir=model", cwd=tmp_path)
    assert_short_error(result, 2, f"--task={task} --mode={mode} is not built yet")
    assert os.listdir(tmp_path) == []  # Nothing written.


def test_pretrain_create_data_points_to_the_pretraining_job(tmp_path):
    result = run_task("--task=PRETRAIN", "--mode=create_data", "--input_dir=in", "--output_dir=out", cwd=tmp_path)
    assert_short_error(result, 2, "--task=PRETRAIN --mode=create_data is not built",
                       "tapas-tf create-pretrain-data")
    assert os.listdir(tmp_path) == []


# --- output directories ------------------------------------------------------------------------


def test_output_dir_that_is_a_file(tmp_path):
    (tmp_path / "taken").write_text("not a directory")
    result = run_task("--task=SQA", "--mode=create_data", "--input_dir=in",
                      f"--output_dir={tmp_path / 'taken'}", cwd=tmp_path)
    assert_short_error(result, 1, f"--output_dir={tmp_path / 'taken'} is a file, not a directory")


def test_output_dir_that_cannot_be_created(tmp_path):
    result = run_task("--task=SQA", "--mode=create_data", "--input_dir=in", f"--output_dir={UNCREATABLE_DIR}",
                      cwd=tmp_path)
    assert_short_error(result, 1, f"--output_dir={UNCREATABLE_DIR}", "cannot create")


def test_model_dir_under_a_file(tmp_path, workspace):
    (tmp_path / "taken").write_text("not a directory")
    result = run_task("--task=SQA", "--mode=train", f"--model_dir={tmp_path / 'taken' / 'model'}",
                      f"--train_file={workspace['train_file']}", cwd=tmp_path)
    assert_short_error(result, 1, f"--model_dir={tmp_path / 'taken' / 'model'}",
                       f"{tmp_path / 'taken'} is a file")


# --- damaged inputs ----------------------------------------------------------------------------


def test_truncated_train_file_is_named(tmp_path, workspace):
    # Cut short after its first record: the check before training passes, reading fails later.
    train_file = truncated_copy(workspace["train_file"], tmp_path / "train.tfrecord")
    result = run_task("--task=SQA", "--mode=train", f"--train_file={train_file}",
                      f"--model_dir={tmp_path / 'model'}", f"--model_config={workspace['model_config']}",
                      f"--max_seq_length={SEQ}", "--train_steps=2", "--train_batch_size=2",
                      "--noprogress_bar", cwd=tmp_path)
    assert_short_error(result, 1, f"{train_file} is truncated or corrupt")


def test_truncated_interactions_file_is_named(tmp_path, workspace):
    interactions = truncated_copy(workspace["interactions"], tmp_path / "dev.tfrecord")
    model_dir = shutil.copytree(workspace["model_dir"], tmp_path / "model")
    result = run_task("--task=SQA", "--mode=predict", f"--interactions_file={interactions}",
                      f"--model_dir={model_dir}", f"--vocab_file={workspace['vocab']}",
                      f"--max_seq_length={SEQ}", cwd=tmp_path)
    assert_short_error(result, 1, f"{interactions}: record 3 is truncated or corrupt")


@pytest.mark.parametrize("suffix", [".data-00000-of-00001", ".index"])
def test_truncated_checkpoint_is_named(tmp_path, workspace, suffix):
    model_dir = shutil.copytree(workspace["model_dir"], tmp_path / "model")
    prefix = model_dir_lib.latest_checkpoint(str(model_dir))
    truncated_copy(prefix + suffix, prefix + suffix, cut_bytes=100)
    result = run_task("--task=SQA", "--mode=predict", f"--interactions_file={workspace['interactions']}",
                      f"--model_dir={model_dir}", f"--vocab_file={workspace['vocab']}",
                      f"--max_seq_length={SEQ}", cwd=tmp_path)
    assert_short_error(result, 1, f"checkpoint {prefix} is truncated or corrupt")


# --- the traceback on request ------------------------------------------------------------------


@pytest.mark.parametrize("debug", [{"env": {"TAPAS_TF_DEBUG": "1"}}, {"args": ["--verbosity=debug"]},
                                   {"args": ["--verbosity", "1"]}])
def test_debug_shows_the_traceback(tmp_path, debug):
    (tmp_path / "taken").write_text("")
    result = run_task("--task=SQA", "--mode=create_data", "--input_dir=in", "--output_dir=taken",
                      *debug.get("args", []), cwd=tmp_path, env=debug.get("env"))
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "UnwritableDirError" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1] == (
        f"{ERROR_PREFIX}--output_dir=taken is a file, not a directory; choose another --output_dir")
