"""XLA chosen at start-up: measured on the run's own batch for long runs, a default for short ones."""

import json
import os
import subprocess
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402

from tapas_tf.training import distribution, trainer as training  # noqa: E402
from tapas_tf.training.xla_choice import XlaChoice, choose_xla, onednn_enabled  # noqa: E402
from tests.training.test_trainer import tiny_configs  # noqa: E402


def _matmuls(features):
    x = tf.cast(features["x"], tf.float32)
    return [tf.linalg.matmul(x, x, transpose_b=True)], {"total": tf.reduce_sum(x)}


def test_choose_xla_times_both_paths_and_keeps_the_faster():
    choice = choose_xla(_matmuls, {"x": tf.ones([4, 64], tf.int32)}, repeats=2)
    assert choice.seconds_plain > 0 and choice.seconds_xla > 0
    assert choice.use_xla == (choice.seconds_xla < choice.seconds_plain)
    assert choice.reason.startswith("measured at start-up")


def test_a_step_that_xla_cannot_compile_stays_plain():
    def with_python(features):
        doubled = tf.numpy_function(lambda x: x * 2, [features["x"]], tf.int32)  # No XLA kernel.
        return [doubled], {}

    choice = choose_xla(with_python, {"x": tf.ones([2, 3], tf.int32)}, repeats=1)
    assert choice == XlaChoice(False, choice.reason, choice.seconds_plain, None)
    assert "XLA failed to compile" in choice.reason and choice.seconds_plain > 0


def _choice(model_dir) -> dict:
    with open(os.path.join(model_dir, training.TRAIN_DIR, training.XLA_CHOICE_FILE)) as f:
        return json.load(f)


def test_trainer_measures_long_runs_and_skips_short_ones(data, tmp_path, monkeypatch):  # noqa: F811
    strategy = distribution.get_strategy("one_device")
    short = str(tmp_path / "short")
    monkeypatch.setattr(training, "onednn_enabled", lambda: False)  # Eigen kernels: XLA may pay.
    training.train(*tiny_configs(data, train_steps=2, use_xla=None), short, strategy)
    assert _choice(short) == {"use_xla": False, "seconds_plain": None, "seconds_xla": None,
                              "onednn": onednn_enabled(),
                              "reason": "2 steps to run (< 1000): not worth measuring; plain TensorFlow"}
    saved = json.load(open(os.path.join(short, training.TRAIN_DIR, training.TRAIN_CONFIG_FILE)))
    assert saved["use_xla"] is False  # The config written is the one the run used.

    monkeypatch.setattr(training, "MIN_STEPS_TO_MEASURE", 2)
    measured = str(tmp_path / "measured")
    training.train(*tiny_configs(data, train_steps=2, use_xla=None), measured, strategy)
    choice = _choice(measured)
    assert choice["seconds_plain"] > 0 and choice["seconds_xla"] > 0
    assert choice["use_xla"] == (choice["seconds_xla"] < choice["seconds_plain"])

    monkeypatch.setattr(training, "onednn_enabled", lambda: True)
    onednn = str(tmp_path / "onednn")
    training.train(*tiny_configs(data, train_steps=2, use_xla=None), onednn, strategy)
    assert _choice(onednn)["use_xla"] is False and _choice(onednn)["seconds_xla"] is None
    assert _choice(onednn)["reason"].startswith("CPU with oneDNN kernels: not measured")

    flagged = str(tmp_path / "flagged")
    training.train(*tiny_configs(data, train_steps=2, use_xla=True), flagged, strategy)
    assert _choice(flagged)["reason"] == "--use_xla=true"


def _onednn_in_fresh_process(**env) -> str:
    script = ("import tapas_tf, tensorflow\n"
              "from tapas_tf.training.xla_choice import onednn_enabled\n"
              "print(onednn_enabled())")
    environment = {key: value for key, value in os.environ.items() if key != "TF_ENABLE_ONEDNN_OPTS"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**environment, "TF_CPP_MIN_LOG_LEVEL": "2", **env})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def test_importing_tapas_tf_turns_onednn_on_unless_the_user_set_it():
    # TensorFlow's own default is off on CPUs without AVX-512 VNNI/BF16 or AMX, and its Eigen
    # kernels train TAPAS there 1.6-1.8x slower (docs/RESULTS.md).
    assert _onednn_in_fresh_process() == "True"
    assert _onednn_in_fresh_process(TF_ENABLE_ONEDNN_OPTS="0") == "False"
    assert onednn_enabled() is (os.environ["TF_ENABLE_ONEDNN_OPTS"] == "1")
