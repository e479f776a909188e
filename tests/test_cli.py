"""Every command line starts quietly: TensorFlow's C++ start-up lines only with --verbosity=debug.

The helpers of `tapas_tf.cli` are tested directly; then each command line runs in a subprocess, as
a user would, on a cheap invocation that loads TensorFlow (an error after the import, or a tiny
real job), once as is and once with `--verbosity=debug`. The environment of these runs has no
TF_CPP_MIN_LOG_LEVEL, so what stderr shows is what the command line chose.
"""

import dataclasses
import io
import logging
import os
import re
import shutil
import subprocess
import sys
from typing import Optional, Tuple

import pytest
from absl import flags as absl_flags

from tapas_tf import cli
from tapas_tf.config_fields import option
from tapas_tf.checkpoints.bundled import BUNDLED_DIR
from tapas_tf.data.interaction_io import write_interactions
from tests.conversion_fixtures import make_interaction
from tests.vocab_fixture import write_test_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "tapas_tf", "data", "example_tables", "aerial_lift_pylons.csv")
# A line of TensorFlow's C++ logging: "2026-11-25 23:38:22.439155: I tensorflow/core/...] ...".
CPP_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ", re.MULTILINE)
START_UP_TEXTS = ("Could not find cuda drivers", "failed call to cuInit", "oneDNN custom operations",
                  "rebuild TensorFlow", "CharacterSet built", "TFRecordDataset buffer_size")
# absl's default prefix: "I1125 23:38:22.439155 140602255551360 file.py:87] ", a thread id in it.
ABSL_PREFIX = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d{6}\s+\d+ \S+:\d+\] ", re.MULTILINE)
PLAIN_PREFIX = re.compile(r"^[DIWEC] \d\d:\d\d:\d\d [\w.]+:\d+\] ", re.MULTILINE)


# --- the helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, environ, quiet", [
    (["prog"], {}, True),
    (["prog", "--verbosity=0"], {}, True),
    (["prog", "--verbosity=warning"], {}, True),
    (["prog", "--verbosity=debug"], {}, False),
    (["prog", "--verbosity", "debug"], {}, False),
    (["prog", "-v", "1"], {}, False),
    (["prog", "-v=2"], {}, False),
    (["prog", "--v=1"], {}, False),
    (["prog", "--verbosity=DEBUG", "--verbosity=0"], {}, True),  # The last one wins, as in absl.
    (["prog", "--", "-v", "1"], {}, True),  # After "--" it is a question, not a flag.
    (["prog"], {"TAPAS_TF_DEBUG": "1"}, False),
    (["prog"], {"TAPAS_TF_DEBUG": "0"}, True),
    (["prog"], {"TF_CPP_MIN_LOG_LEVEL": "1"}, False),  # The user's own choice stays.
])
def test_quiet_tensorflow_sets_the_level_unless_debug_or_set(argv, environ, quiet):
    environ = dict(environ)
    before = environ.get(cli.TF_LOG_LEVEL_ENV)
    assert cli.quiet_tensorflow(argv, environ) is quiet
    assert environ.get(cli.TF_LOG_LEVEL_ENV) == ("3" if quiet else before)


def test_verbosity_names_become_absl_numbers():
    assert cli.verbosity_names_as_numbers(
        ["prog", "--verbosity=debug", "-v", "warning", "--v=info", "--verbosity=-2", "--", "-v", "debug"]) == [
        "prog", "--verbosity=1", "-v", "-1", "--v=0", "--verbosity=-2", "--", "-v", "debug"]
    assert cli.verbosity_names_as_numbers(["prog", "--verbosity=loud"]) == ["prog", "--verbosity=loud"]
    assert [cli.verbosity_level(v) for v in ("debug", "INFO", "warning", "error", "fatal", "3")] == [1, 0, -1, -2, -3, 3]
    with pytest.raises(ValueError, match="not a verbosity: 'loud'"):
        cli.verbosity_level("loud")


def test_plain_log_lines_have_no_date_microseconds_or_thread():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(cli.PlainFormatter())
    record = logging.LogRecord("x", logging.WARNING, "/a/b/run_task.py", 87, "dev: %d questions", (3,), None)
    handler.emit(record)
    assert re.fullmatch(r"W \d\d:\d\d:\d\d run_task\.py:87\] dev: 3 questions\n", stream.getvalue())


def test_nearest_flag_and_its_message():
    known = ["--max_seq_length", "--table", "--threshold"]
    assert cli.nearest_flag("--max_seq_lenght=128", known) == "--max_seq_length"
    assert cli.nearest_flag("-tabel", known) == "--table"
    assert cli.nearest_flag("--zzzz", known) is None
    assert cli.unknown_flag_message("--tabel=x", "--table") == "unknown flag --tabel=x; did you mean --table?"
    assert cli.unknown_flag_message("stray", None) == "unknown argument stray"


# --- every command line, in a subprocess -------------------------------------------------------


def _env(**extra):
    environment = {key: value for key, value in os.environ.items()
                   if key not in (cli.TF_LOG_LEVEL_ENV, cli.DEBUG_ENV)}
    return {**environment, **extra}


def _pretrain_inputs(tmp_path):
    interaction = make_interaction(["city", "country"], [["paris", "france"], ["berlin", "germany"]],
                                   [("which city?", [(0, 0)])])
    interaction.id = "x-0"
    write_interactions(str(tmp_path / "i.txtpb"), [interaction])
    return [f"--input_interactions={tmp_path / 'i.txtpb'}", f"--vocab_file={write_test_vocab(tmp_path / 'v.txt')}"]


def _weightless_model_dir(tmp) -> str:
    """A model directory with a config and no weights: ask and serve load TensorFlow to restore it and
    fail then (a directory without a config fails before TensorFlow loads)."""
    os.makedirs(tmp / "no-weights", exist_ok=True)
    shutil.copy(os.path.join(BUNDLED_DIR, "tapas_config.json"),
                tmp / "no-weights")
    return str(tmp / "no-weights")


# Each loads TensorFlow and then stops: an error after the import, or a tiny job (pre-training data).
COMMAND_LINES = {
    "run_task": lambda tmp: [os.path.join(ROOT, "run_task.py"), "--task=SQA", "--mode=export",
                             f"--model_dir={tmp / 'no-model'}", f"--export_dir={tmp / 'export'}"],
    "ask": lambda tmp: ["-m", "tapas_tf.ask", f"--table={TABLE}", f"--model_dir={_weightless_model_dir(tmp)}",
                        "which?"],
    "serve": lambda tmp: ["-m", "tapas_tf.serve", f"--model_dir={_weightless_model_dir(tmp)}"],
    "create_pretrain_data": lambda tmp: ["-m", "tapas_tf.commands.dispatch", "create-pretrain-data",
                                         f"--output_dir={tmp / 'out'}", "--stage=examples",
                                         "--max_seq_length=32", "--direct_num_workers=1", *_pretrain_inputs(tmp)],
}
# create-data: tests/pipelines/test_create_task_data.py runs it on a tiny release. import and
# init-from-bert refuse a missing source before TensorFlow loads, and run through the same
# dispatch (`tapas_tf.commands.dispatch.run`) as ask, serve and create-pretrain-data here.


def _run(args, **env):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=_env(**env))


def assert_quiet(stderr: str) -> None:
    """No TensorFlow C++ line, no start-up text, no absl thread-id prefix."""
    assert not CPP_LOG_LINE.search(stderr), stderr[-3000:]
    for text in START_UP_TEXTS:
        assert text not in stderr, (text, stderr[-3000:])
    assert not ABSL_PREFIX.search(stderr), stderr[-3000:]


@pytest.mark.parametrize("name", sorted(COMMAND_LINES))
def test_command_line_hides_tensorflow_start_up_lines_unless_debug(tmp_path, name):
    args = COMMAND_LINES[name](tmp_path)
    quiet = _run(args)
    assert "Traceback" not in quiet.stderr, quiet.stderr[-3000:]
    assert_quiet(quiet.stderr)
    loud = _run(args + ["--verbosity=debug"])
    assert loud.returncode == quiet.returncode, (quiet.stderr[-2000:], loud.stderr[-3000:])
    # TensorFlow was loaded, and with debug its start-up lines are back (the variable is not forced).
    assert CPP_LOG_LINE.search(loud.stderr), loud.stderr[-3000:]
    assert not ABSL_PREFIX.search(loud.stderr), loud.stderr[-3000:]
    assert PLAIN_PREFIX.search(loud.stderr), loud.stderr[-3000:]  # Debug lines of ours or TensorFlow's.


def test_a_level_the_user_set_wins(tmp_path):
    result = _run(COMMAND_LINES["run_task"](tmp_path), TF_CPP_MIN_LOG_LEVEL="0")
    assert CPP_LOG_LINE.search(result.stderr), result.stderr[-3000:]
    assert result.stderr.rstrip().splitlines()[-2].startswith("run_task.py: error: model directory")


# --- flags generated from a frozen config ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _JobConfig:
    output: str = option(help="Where to write.")
    mode: str = option("fast", "How.", choices=("fast", "slow"))
    inputs: Tuple[str, ...] = option((), "An input.")
    lengths: Tuple[int, ...] = option((128, 256), "Bucket lengths.")
    rate: Optional[float] = option(None, "A rate; default the task's.")
    steps: int = option(10, "Steps.")
    verbose: bool = option(False, "Say more.")


def _flag_values(*argv):
    values = absl_flags.FlagValues()
    cli.define_config_flags(_JobConfig, __name__, flag_values=values, none_defaults=("steps",))
    values(["prog", *argv])
    return values


def test_config_flags_are_generated_from_the_fields():
    values = _flag_values("--output=out", "--mode=slow", "--inputs=a", "--inputs=b", "--lengths=64,512",
                          "--rate=0.5", "--verbose")
    config = cli.config_from_flags(_JobConfig, flag_values=values, skip=("steps",), steps=3)
    assert config == _JobConfig(output="out", mode="slow", inputs=("a", "b"), lengths=(64, 512), rate=0.5,
                                steps=3, verbose=True)
    defaults = _flag_values("--output=out")
    assert cli.config_flag_values(_JobConfig, ["inputs", "lengths", "rate", "steps", "verbose"], defaults) == {
        "inputs": None, "lengths": (128, 256), "rate": None, "steps": None, "verbose": False}
    assert values["mode"].help == "<fast|slow>: How." and values["lengths"].help == "Bucket lengths."


def test_config_flags_refuse_a_missing_required_flag_a_bad_choice_and_a_field_without_help():
    with pytest.raises(absl_flags.IllegalFlagValueError, match="--output must have a value"):
        _flag_values("--mode=fast")
    with pytest.raises(absl_flags.IllegalFlagValueError, match="value should be one of <fast|slow>"):
        _flag_values("--output=x", "--mode=quick")

    @dataclasses.dataclass(frozen=True)
    class NoHelp:
        name: str = "x"

    with pytest.raises(ValueError, match="NoHelp.name has no help text"):
        cli.define_config_flags(NoHelp, __name__, flag_values=absl_flags.FlagValues())
