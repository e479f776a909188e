"""Stopping loses nothing: SIGTERM or SIGINT ends a run after its step with a checkpoint, and a
run killed (SIGKILL) at random points of its checkpoint saves always resumes from a complete one.

The tiny model of tests/training/test_trainer.py trains on its eight fixture examples, in
shuffled batches of two (a seed: a resumed run reads the batches the uninterrupted run reads).
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import json  # noqa: E402
import queue  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import threading  # noqa: E402
from typing import Dict, List  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.training import trainer as training  # noqa: E402
from tapas_tf.training.config import TrainConfig  # noqa: E402
from tapas_tf.training.stopping import StopSignals  # noqa: E402
from tests.training.test_input_pipeline import NUM_EXAMPLES, SEQ  # noqa: E402
from tests.training.test_trainer import ROOT, TINY_CONFIG, tiny_configs  # noqa: E402

SHUFFLED = dict(train_batch_size=2, shuffle_buffer=NUM_EXAMPLES, seed=1)


def _env() -> Dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}


def _checkpoint_tensors(prefix: str) -> Dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/.ATTRIBUTES/VARIABLE_VALUE")}


def _assert_same_checkpoints(prefix: str, reference: str) -> None:
    """Every variable (model, Adam's slots and iterations, step) as in the reference run's; not
    the count of saves, which a stop adds to."""
    actual, expected = _checkpoint_tensors(prefix), _checkpoint_tensors(reference)
    assert sorted(actual) == sorted(expected)
    assert sum("OPTIMIZER_SLOT" in name for name in actual) > 10
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


def _train(model_config, train_config, model_dir: str):
    """Trains (or resumes) in-process: (the result, the steps run)."""
    steps: List[int] = []
    result = training.train(model_config, train_config, model_dir,
                            on_step_end=lambda step, values: steps.append(step))
    return result, steps


# --- the signal handlers ---


def test_the_first_signal_is_recorded_a_second_sigint_interrupts_and_the_handlers_come_back():
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(KeyboardInterrupt):
        with StopSignals() as stop:
            os.kill(os.getpid(), signal.SIGINT)
            assert stop.requested == "SIGINT"
            os.kill(os.getpid(), signal.SIGINT)
    assert {sig: signal.getsignal(sig) for sig in previous} == previous


def test_outside_the_main_thread_the_handlers_are_left_alone():
    seen = []

    def run():
        with StopSignals() as stop:
            seen.append((signal.getsignal(signal.SIGTERM), stop.requested))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [(signal.getsignal(signal.SIGTERM), None)]


_TWO_SIGTERMS = """
    import os, signal
    from tapas_tf.training.stopping import StopSignals
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        print("REQUESTED", stop.requested, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        print("STILL RUNNING", flush=True)
"""


def test_a_second_sigterm_ends_the_process_at_once():
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_TWO_SIGTERMS)], capture_output=True,
                            text=True, timeout=60, cwd=ROOT, env=_env())
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert result.stdout == "REQUESTED SIGTERM\n"
    assert "SIGTERM again: stopping now, without a checkpoint." in result.stderr


# --- a run stopped by a signal ---


def test_sigint_stops_after_the_step_with_a_checkpoint_and_the_resume_continues(data, tmp_path):
    model_config, train_config = tiny_configs(data, train_steps=8, save_checkpoints_steps=100, **SHUFFLED)
    model_dir = str(tmp_path / "model")
    steps = []
    # Python's own handler in a terminal; SIG_IGN when the suite was started in the background.
    handler_before = signal.getsignal(signal.SIGINT)

    def on_step_end(step, values):
        steps.append(step)
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    result = training.train(model_config, train_config, model_dir, on_step_end=on_step_end)
    assert (result.step, result.stopped_by, steps) == (3, "SIGINT", [1, 2, 3])
    assert model_dir_lib.latest_checkpoint(model_dir).endswith("/ckpt-3")  # Not a periodic save (every 100).
    assert signal.getsignal(signal.SIGINT) is handler_before  # The run's handler is gone again.

    resumed, steps = _train(model_config, train_config, model_dir)
    assert (resumed.step, resumed.stopped_by, steps) == (8, None, [4, 5, 6, 7, 8])


def test_a_signal_before_the_first_step_ends_the_run_without_a_step(data, tmp_path, monkeypatch, caplog):
    """A signal while the run starts (here: while it checks its data) stops it before any step.
    (SIGINT: were the handler missing, SIGTERM would end the test session.)"""
    check_examples, sent = training.input_pipeline.check_examples, []

    def check_and_get_sigint(*args, **kwargs):
        if not sent:  # Once: the data set checks the files again, and a second signal interrupts.
            sent.append(os.kill(os.getpid(), signal.SIGINT))
        return check_examples(*args, **kwargs)

    monkeypatch.setattr(training.input_pipeline, "check_examples", check_and_get_sigint)
    model_dir = str(tmp_path / "model")
    with caplog.at_level("WARNING"):
        result, steps = _train(*tiny_configs(data, train_steps=4), model_dir)
    assert (result.step, result.stopped_by, steps) == (0, "SIGINT", [])
    assert model_dir_lib.latest_checkpoint(model_dir) is None
    assert caplog.records[-1].getMessage() == (
        "Stopped at step 0 of 4 (SIGINT) before its first step: nothing to save; run the same command to "
        "resume.")


CLI_STEPS = 60
_STOPPED = re.compile(r"Stopped at step (\d+) of 60 \(SIGTERM\) with a checkpoint in (\S+); run the same "
                      r"command to resume\.")


def _run_and_signal(command: List[str], cwd: str, after: str, sig: int, timeout: float = 300):
    """Runs `command`, sends `sig` once a stderr line contains `after`; (return code, stderr)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               cwd=cwd, env=_env())
    lines: "queue.Queue" = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr] + [lines.put(None)],
                     daemon=True).start()
    log, sent = [], False
    try:
        for line in iter(lambda: lines.get(timeout=timeout), None):
            log.append(line)
            if not sent and after in line:
                process.send_signal(sig)
                sent = True
        return process.wait(timeout=timeout), "".join(log)
    finally:
        if process.poll() is None:
            process.kill()


def test_sigterm_mid_run_exits_0_with_a_checkpoint_and_the_resume_loses_nothing(data, tmp_path):
    """The command is stopped as a scheduler stops it, once step 3 is logged (while it runs step 4
    or a later one); the step it reached is saved, and the resumed run ends where an uninterrupted
    one does, to every variable."""
    model_dir, config_file = tmp_path / "model", tmp_path / "tiny.json"
    TINY_CONFIG.to_json_file(str(config_file))
    command = [sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA", "--mode=train",
               f"--train_file={data}", f"--model_dir={model_dir}", f"--model_config={config_file}",
               f"--max_seq_length={SEQ}", f"--train_steps={CLI_STEPS}", "--train_batch_size=2",
               f"--shuffle_buffer={NUM_EXAMPLES}", "--seed=1", "--learning_rate=1e-2",
               "--save_checkpoints_steps=1000", "--log_steps=1", "--precision=float32", "--nouse_xla",
               "--noprogress_bar"]
    code, log = _run_and_signal(command, str(tmp_path), after=f"step 3/{CLI_STEPS}:", sig=signal.SIGTERM)
    assert code == 0, log[-3000:]
    stopped = _STOPPED.search(log)
    assert stopped, log[-3000:]
    reached = int(stopped.group(1))
    assert 3 <= reached < CLI_STEPS
    assert f"step {reached}/{CLI_STEPS}:" in log and f"step {reached + 1}/{CLI_STEPS}:" not in log
    latest = model_dir_lib.latest_checkpoint(str(model_dir))
    assert latest == stopped.group(2) and latest.endswith(f"/ckpt-{reached}")
    assert tf.train.load_checkpoint(latest).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == reached

    # The same configs in-process: the run resumed, and one never stopped.
    model_config = model_dir_lib.load_config(str(model_dir))
    with open(model_dir / training.TRAIN_DIR / training.TRAIN_CONFIG_FILE) as f:
        train_config = TrainConfig(**json.load(f))
    resumed, steps = _train(model_config, train_config, str(model_dir))
    assert (resumed.step, steps) == (CLI_STEPS, list(range(reached + 1, CLI_STEPS + 1)))
    reference_dir = str(tmp_path / "reference")
    _train(model_config, train_config, reference_dir)
    _assert_same_checkpoints(model_dir_lib.latest_checkpoint(str(model_dir)),
                             model_dir_lib.latest_checkpoint(reference_dir))


# --- SIGKILL during checkpoint saves ---

KILLS = 10
KILL_STEPS = 3 * KILLS + 4  # Each killed run trains three steps; the last resume finishes.


def kill_test_configs(data: str):
    """One encoder layer (each killed run builds and traces the model anew); a checkpoint every
    step, two kept, so every save also deletes one."""
    model_config, train_config = tiny_configs(data, train_steps=KILL_STEPS, save_checkpoints_steps=1,
                                              keep_checkpoint_max=2, **SHUFFLED)
    return model_config.replace(num_hidden_layers=1), train_config


# Imports TensorFlow once, then forks a child per run: the children start TensorFlow afresh (the
# parent never runs an op), which costs far less than a new interpreter each.
_KILLED_IN_SAVES = """
    import os, random, signal, sys, threading, time, traceback
    import tensorflow as tf
    from tapas_tf.training import trainer as training
    from tests.training.test_stopping import kill_test_configs

    data, model_dir, kills = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model_config, train_config = kill_test_configs(data)
    save = tf.train.CheckpointManager.save

    def killed_in_third_save(rng):
        durations = []

        def wrapped(manager, checkpoint_number=None, **kwargs):
            if len(durations) == 2:  # Killed a random share of the last save's time into this one.
                print("ARMED", checkpoint_number, flush=True)
                delay = rng.uniform(0.0, durations[1])
                threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL)).start()
            start = time.perf_counter()
            path = save(manager, checkpoint_number=checkpoint_number, **kwargs)
            durations.append(time.perf_counter() - start)
            print("SAVED", checkpoint_number, flush=True)
            if len(durations) == 3:
                time.sleep(120)  # Nothing runs after this save: the kill lands in it or just after it.
            return path

        return wrapped

    def child(seed):
        tf.train.CheckpointManager.save = killed_in_third_save(random.Random(seed))
        first = []

        def on_step_end(step, values):
            if not first:
                first.append(step)
                print("RESUMED", step - 1, flush=True)

        training.train(model_config, train_config, model_dir, on_step_end=on_step_end)

    for i in range(kills):
        pid = os.fork()
        if pid == 0:
            try:
                child(i)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)  # Never reached by a killed child.
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print("KILLED" if killed else f"EXITED {status}", flush=True)
"""


_MARK = re.compile(r"(RESUMED|SAVED|ARMED) (-?\d+)|(KILLED|EXITED)\b")


def _killed_runs(stdout: str) -> List[Dict[str, object]]:
    """Per child: the step it resumed at, the steps whose save returned, the step it was killed
    saving, and whether SIGKILL ended it. Marks are found anywhere in a line: a child's output
    written without a line end (TensorFlow's, as it dies) may run into the parent's next mark."""
    runs, run = [], {"saved": []}
    for match in _MARK.finditer(stdout):
        word, value, end = match.group(1), match.group(2), match.group(3)
        if word == "RESUMED":
            run["resumed"] = int(value)
        elif word == "SAVED":
            run["saved"].append(int(value))
        elif word == "ARMED":
            run["armed"] = int(value)
        elif end:
            run["killed"] = end == "KILLED"
            runs.append(run)
            run = {"saved": []}
    return runs


def test_sigkill_at_random_points_of_checkpoint_saves_always_leaves_a_complete_checkpoint(data, tmp_path):
    """Ten runs in a row in one model directory, each killed during its third save, after a
    random share of the time the save before it took; each resumes the one before."""
    model_dir = str(tmp_path / "model")
    script = textwrap.dedent(_KILLED_IN_SAVES)
    result = subprocess.run([sys.executable, "-c", script, data, model_dir, str(KILLS)],
                            capture_output=True, text=True, timeout=1800, cwd=ROOT, env=_env())
    # The bound is generous (about 30 s on a quiet 2-core machine; ten fresh TensorFlow children
    # slow down many times over beside other work): the test is about what the kills leave.
    assert result.returncode == 0, result.stderr[-3000:]
    runs = _killed_runs(result.stdout)
    assert len(runs) == KILLS and all(run["killed"] for run in runs), (runs, result.stdout[-3000:],
                                                                       result.stderr[-2000:])
    assert runs[0]["resumed"] == 0
    for run in runs:
        # Resumed at the newest step saved, trained three steps, killed saving the third.
        assert run["armed"] == run["resumed"] + 3
        assert run["saved"][:2] == [run["resumed"] + 1, run["resumed"] + 2]
    for run, after in zip(runs, runs[1:]):
        # Every save that returned is there; the one killed is there or not, never half there.
        assert after["resumed"] in (run["armed"] - 1, run["armed"]), (run, after)
    assert "Skipping a checkpoint" not in result.stderr and "from scratch" not in result.stderr
    killed_inside = sum(run["saved"][-1] != run["armed"] for run in runs)
    assert killed_inside >= 1, runs  # Else the kills all landed after the saves (a timer gone wrong).

    model_config, train_config = kill_test_configs(data)
    resumed, steps = _train(model_config, train_config, model_dir)
    assert steps[0] - 1 in (runs[-1]["armed"] - 1, runs[-1]["armed"]) and resumed.step == KILL_STEPS
    checkpoint_dir = model_dir_lib.checkpoint_dir(model_dir)
    # What the kills left is gone: temporary files, and the checkpoints beyond the two kept.
    assert sorted(os.listdir(checkpoint_dir)) == ["checkpoint"] + [
        f"ckpt-{step}{suffix}" for step in (KILL_STEPS - 1, KILL_STEPS)
        for suffix in (".data-00000-of-00001", ".index")]
    reference_dir = str(tmp_path / "reference")
    _train(model_config, train_config, reference_dir)
    _assert_same_checkpoints(model_dir_lib.latest_checkpoint(model_dir),
                             model_dir_lib.latest_checkpoint(reference_dir))
