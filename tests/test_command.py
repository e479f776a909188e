"""The installed command `tapas-tf`: subcommands, their help and one-line errors, and a tiny real run.

The console script is the one `pip install -e .` generates next to the venv's python; every run
is a subprocess, as a user would type it, from a directory that is not the checkout. The end-to-end
run makes the SQA sample with `tapas-tf sample-data`, converts it with `tapas-tf create-data` and
trains a tiny model for 2 steps with `tapas-tf train` (about 20 seconds on 2 cores).
`python run_task.py` keeps its own tests (tests/test_run_task_cli.py, tests/test_layout.py).
"""

import json
import os
import subprocess
import sysconfig

import pytest

from tapas_tf import cli
from tapas_tf.commands import dispatch
from tests.test_cli import PLAIN_PREFIX, assert_quiet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "tapas_tf", "data", "example_tables", "aerial_lift_pylons.csv")
SCRIPT = os.path.join(sysconfig.get_path("scripts"), "tapas-tf")


def tapas_tf(*args, cwd, timeout=300) -> subprocess.CompletedProcess:
    """Runs the console script; the environment leaves TensorFlow's log level to the command."""
    unset = (cli.TF_LOG_LEVEL_ENV, cli.DEBUG_ENV, "PYTHONPATH")
    env = {key: value for key, value in os.environ.items() if key not in unset}
    return subprocess.run([SCRIPT, *args], cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=timeout)


def assert_one_line_error(result, prog: str, *expected: str, exit_code: int = 2) -> str:
    """One `PROG: error: ...` line on stderr holding every `expected` text, no traceback."""
    assert result.returncode == exit_code, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith(f"{prog}: error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    if exit_code == 2:  # A usage error is the only line.
        assert result.stderr.strip() == errors[0], result.stderr[-3000:]
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def test_pip_install_made_the_console_script():
    assert os.access(SCRIPT, os.X_OK), f"no {SCRIPT}: run `pip install -e .` (pyproject's [project.scripts])"


def test_the_installed_package_declares_the_pinned_requirements():
    """`pip install tapas-tf` (a wheel, no checkout) brings what its commands import."""
    import importlib.metadata

    declared = {line.split(";")[0].strip() for line in importlib.metadata.requires("tapas-tf") or ()
                if "extra ==" not in line}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "requirements.txt"), encoding="utf-8") as f:
        pinned = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    assert {"tensorflow==2.20.0", "apache-beam[gcp]==2.77.0", "ai-edge-litert==2.3.0"} <= pinned
    normalise = lambda text: text.replace(" ", "").lower()  # noqa: E731 (metadata may reorder specifiers)
    assert {normalise(d) for d in declared} >= {normalise(p) for p in pinned if "," not in p}
    assert len(declared) == len(pinned)


def test_help_lists_every_subcommand_with_one_line(tmp_path):
    result = tapas_tf("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for name, sub in dispatch.SUBCOMMANDS.items():
        (line,) = [line for line in lines if line.split()[:1] == [name]]
        assert line.endswith(sub.summary)
    assert {"ask", "serve", "import", "init-from-bert", "create-data", "train", "predict",
            "predict-and-evaluate", "evaluate", "export", "create-pretrain-data"} <= set(dispatch.SUBCOMMANDS)


@pytest.mark.parametrize("args, expected", [
    ([], ["a subcommand is required: ask, serve"]),
    (["trian"], ["unknown subcommand trian; did you mean train?"]),
    (["aks", "--table=x"], ["unknown subcommand aks; did you mean ask?"]),
    (["--task=SQA", "--mode=train"], ["the subcommand comes first: tapas-tf train"]),
])
def test_no_or_unknown_subcommand_is_one_line(tmp_path, args, expected):
    assert_one_line_error(tapas_tf(*args, cwd=tmp_path), "tapas-tf", *expected)


# A flag that matters, and a misspelling of one, for every subcommand.
FLAGS = {
    "ask": ("--table", "--tabel=x"),
    "serve": ("--port", "--prot=8080"),
    "sample-data": ("--output_dir", "--output_dri=x"),
    "create-data": ("--input_dir", "--input_dri=x"),
    "train": ("--train_steps", "--train_step=3"),
    "predict": ("--predict_split", "--predict_spilt=dev"),
    "predict-and-evaluate": ("--interactions_file", "--interactions_fiel=x"),
    "evaluate": ("--eval_file", "--eval_fiel=x"),
    "export": ("--export_dir", "--export_dri=x"),
    "export-retriever": ("--export_dir", "--export_dri=x"),
    "import": ("--source", "--sorce=x"),
    "init-from-bert": ("--bert_dir", "--bert_dri=x"),
    "create-pretrain-data": ("--input_pages", "--input_pagse=x"),
    "collect-tables": ("--exclude_interactions", "--exclude_interaction=x"),
    "make-ict-pairs": ("--sentences_per_table", "--sentences_per_tabel=3"),
    "bundle": ("--weights", "--weigths=int8"),
    "make-statements": ("--pairs_per_table", "--pairs_per_tabel=3"),
    "verify": ("--table", "--tabel=x"),
    "index": ("--tables", "--tabels=x"),
    "search": ("--index_dir", "--index_dri=x"),
    "evaluate-retrieval": ("--queries", "--querys=x"),
    "train-retriever": ("--init_model", "--init_modle=x"),
    "encode-tables": ("--tables", "--tabels=x"),
}


def test_every_subcommand_is_checked_here():
    assert set(FLAGS) == set(dispatch.SUBCOMMANDS)


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_subcommand_help_names_it_and_shows_its_flags(tmp_path, name):
    result = tapas_tf(name, "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"tapas-tf {name}" in result.stdout
    assert FLAGS[name][0] in result.stdout
    if dispatch.SUBCOMMANDS[name].mode:  # run_task's flags, the mode implied.
        assert "--task" in result.stdout and "--mode=" not in result.stdout.split("flags:")[0]


def test_ask_help_shows_the_table_and_the_model(tmp_path):
    result = tapas_tf("ask", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--table" in result.stdout and "--model_dir" in result.stdout
    assert "python -m tapas_tf.ask" not in result.stdout  # Its examples speak of the installed command.


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_misspelt_flag_is_one_line_naming_the_nearest(tmp_path, name):
    flag, misspelt = FLAGS[name]
    assert_one_line_error(tapas_tf(name, misspelt, cwd=tmp_path), f"tapas-tf {name}",
                          f"unknown flag {misspelt}; did you mean {flag}?")


def test_a_different_mode_is_refused(tmp_path):
    result = tapas_tf("train", "--task=SQA", "--mode=predict", "--model_dir=m", cwd=tmp_path)
    assert_one_line_error(result, "tapas-tf train", "--mode=predict contradicts tapas-tf train",
                          "tapas-tf predict")
    result = tapas_tf("create-data", "--task=SQA", cwd=tmp_path)
    assert_one_line_error(result, "tapas-tf create-data",
                          "tapas-tf create-data needs --input_dir, --output_dir")


def test_errors_of_a_subcommand_name_it(tmp_path):
    # Both load TensorFlow (ask once the table is read, import on import), and start quietly.
    result = tapas_tf("ask", f"--table={TABLE}", f"--model_dir={tmp_path / 'no-model'}", "which?",
                      cwd=tmp_path)
    assert_one_line_error(result, "tapas-tf ask", str(tmp_path / "no-model"), exit_code=1)
    assert_quiet(result.stderr)
    result = tapas_tf("import", "--format=hf", f"--source={tmp_path / 'none'}", "--model_dir=out",
                      cwd=tmp_path)
    assert_one_line_error(result, "tapas-tf import", str(tmp_path / "none"), exit_code=1)
    assert_quiet(result.stderr)


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_tensorflow_is_quieted_before_the_subcommand_loads(monkeypatch, name):
    """In process: the log level is set before the subcommand's module is imported or run."""
    monkeypatch.delenv(cli.TF_LOG_LEVEL_ENV, raising=False)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    seen = []
    from tapas_tf.cli import runner as command_runner

    for runner in ("_run_command", "_run_mode"):
        monkeypatch.setattr(command_runner, runner, lambda sub, prog, rest: seen.append(
            (prog, rest, os.environ.get(cli.TF_LOG_LEVEL_ENV))) or 0)
    assert dispatch.main(["tapas-tf", name, "--x=1"]) == 0
    assert seen == [(f"tapas-tf {name}", ["--x=1"], cli.QUIET_TF_LOG_LEVEL)]


def test_sample_data_create_data_and_train(tmp_path):
    result = tapas_tf("sample-data", "--output_dir=sample", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    result = tapas_tf("create-data", "--task=SQA", "--input_dir=sample", "--output_dir=data",
                      "--max_seq_length=128", "--direct_num_workers=1", cwd=tmp_path)  # BERT's vocabulary.
    assert result.returncode == 0, result.stderr[-3000:]
    assert_quiet(result.stderr)
    assert PLAIN_PREFIX.search(result.stderr) and "train: 9 of 9 questions converted" in result.stderr
    assert "WriteImpl" not in result.stderr and "Renamed" not in result.stderr  # Beam's file-sink chatter.
    report = json.loads((tmp_path / "data" / "conversion_report.json").read_text())
    assert report["splits"]["train"]["examples_written"] == 9 and report["config"]["max_seq_length"] == 128

    result = tapas_tf("train", "--task=SQA", "--output_dir=data", "--model_dir=model", "--model_size=tiny",
                      "--max_seq_length=128", "--train_steps=2", "--train_batch_size=2", "--noprogress_bar",
                      cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_quiet(result.stderr)
    assert "Trained to step 2" in result.stderr
    assert (tmp_path / "model" / "tapas_config.json").exists()
