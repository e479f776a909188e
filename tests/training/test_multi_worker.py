"""Two worker processes on 127.0.0.1 (MultiWorkerMirroredStrategy, TF_CONFIG, free ports) train
the tiny model of tests/training/test_trainer.py on its eight fixture examples, in file order, in
global batches of four: worker w reads examples w, w + 2, ..., so each step's batch is the one a
single worker reads, and the loss is the same.

Run 1 loses worker 1 (SIGKILL after step 3): the chief ends with one line naming it and the
checkpoint of step 2. Run 2 restarts both; they resume at step 2; worker 1 gets SIGTERM after step
4, tells the chief through step 5's all-reduce, and both stop after step 5 with a checkpoint.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import json  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
from typing import Dict, List, Optional  # noqa: E402

import pytest  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.training import distribution, trainer as training  # noqa: E402
from tests.training.test_trainer import ROOT, tiny_configs  # noqa: E402

STEPS = 8
OPTIONS = dict(train_steps=STEPS, train_batch_size=4, save_checkpoints_steps=2, warmup_ratio=0.0)
# The collective sums the two workers' halves of the batch in another order than one device sums
# it; over a few Adam steps that moves the loss by about 1e-7.
TOLERANCE = 1e-5
TIMEOUT = 600  # A run that hangs fails here instead of blocking the suite (2 busy cores: about 60 s).

_WORKER = """
    import json, os, signal, sys
    import tensorflow as tf
    from tapas_tf.training import distribution, trainer as training
    from tests.training.test_multi_worker import OPTIONS
    from tests.training.test_trainer import tiny_configs

    data, model_dir, signal_step, signal_name = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    strategy = distribution.get_strategy("multi_worker_mirrored")
    save = tf.train.CheckpointManager.save

    def save_and_say_where(manager, checkpoint_number=None, **kwargs):
        print("SAVED " + json.dumps([checkpoint_number, manager.directory]), flush=True)
        return save(manager, checkpoint_number=checkpoint_number, **kwargs)

    tf.train.CheckpointManager.save = save_and_say_where

    def on_step_end(step, values):
        print("STEP " + json.dumps([step, values]), flush=True)
        if step == signal_step:
            os.kill(os.getpid(), getattr(signal, signal_name))

    try:
        result = training.train(*tiny_configs(data, **OPTIONS), model_dir, strategy, on_step_end=on_step_end)
    except distribution.WorkerLostError as e:
        print("LOST " + json.dumps(str(e)), flush=True)
        sys.exit(3)
    print("RESULT " + json.dumps([strategy.num_replicas_in_sync, result.step, result.stopped_by]), flush=True)
"""


def _free_ports(count: int) -> List[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _run_workers(data: str, model_dir: str, tmp_dirs: List[str], signals: Dict[int, tuple]) -> List[dict]:
    """Starts one process per entry of `tmp_dirs` (its TMPDIR) as the workers of one cluster and
    waits for all; `signals` = {worker: (step, signal name)} sends that signal to the worker after
    that step. Returns per worker: exit code, steps {step: values}, saves [(number, directory)],
    the LOST message and the RESULT, and stderr."""
    addresses = [f"127.0.0.1:{port}" for port in _free_ports(len(tmp_dirs))]
    processes = []
    for index, tmp_dir in enumerate(tmp_dirs):
        step, name = signals.get(index, (0, "SIGKILL"))
        tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
        env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2",
               "TF_CONFIG": json.dumps(tf_config), "TMPDIR": tmp_dir}
        processes.append(subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_WORKER), data, model_dir, str(step), name],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env))
    try:
        outputs = [process.communicate(timeout=TIMEOUT) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return [_parse(process.returncode, stdout, stderr)
            for process, (stdout, stderr) in zip(processes, outputs)]


def _parse(code: int, stdout: str, stderr: str) -> dict:
    worker = {"code": code, "steps": {}, "saves": [], "lost": None, "result": None, "stderr": stderr}
    for line in stdout.splitlines():
        word, _, value = line.partition(" ")
        if word == "STEP":
            step, values = json.loads(value)
            worker["steps"][step] = values
        elif word == "SAVED":
            worker["saves"].append(tuple(json.loads(value)))
        elif word == "LOST":
            worker["lost"] = json.loads(value)
        elif word == "RESULT":
            worker["result"] = json.loads(value)
    return worker


def _assert_losses(steps: Dict[int, dict], reference: Dict[int, dict], expected_steps: List[int]) -> None:
    assert sorted(steps) == expected_steps
    for step in expected_steps:
        for key in ("total_loss", "gradient_norm", "learning_rate"):
            assert steps[step][key] == pytest.approx(reference[step][key], rel=TOLERANCE), (step, key)


def _event_files(model_dir: str) -> List[str]:
    return [name for name in os.listdir(os.path.join(model_dir, training.TRAIN_DIR))
            if name.startswith("events.")]


@pytest.fixture(scope="module")
def one_worker(data, tmp_path_factory) -> Dict[int, dict]:
    """{step: values} of the same training on one device: the reference."""
    values: Dict[int, dict] = {}
    training.train(*tiny_configs(data, **OPTIONS), str(tmp_path_factory.mktemp("one_worker")),
                   distribution.get_strategy("one_device"),
                   on_step_end=lambda step, step_values: values.__setitem__(step, step_values))
    assert sorted(values) == list(range(1, STEPS + 1))
    return values


def _only_the_chief_saved_in_the_model_dir(workers: List[dict], model_dir: str,
                                           tmp_dir: Optional[str] = None) -> None:
    chief, other = workers
    checkpoint_dir = model_dir_lib.checkpoint_dir(model_dir)
    assert chief["saves"] and {directory for _, directory in chief["saves"]} == {checkpoint_dir}
    assert [number for number, _ in other["saves"]] == [number for number, _ in chief["saves"]]
    other_dirs = {directory for _, directory in other["saves"]}
    assert len(other_dirs) == 1 and checkpoint_dir not in other_dirs
    if tmp_dir is not None:  # A worker that ended on its own removed its directory.
        assert os.path.dirname(other_dirs.pop()) == tmp_dir and os.listdir(tmp_dir) == []


def test_two_workers_train_as_one_lose_a_worker_in_one_line_and_resume(data, one_worker, tmp_path):
    model_dir = str(tmp_path / "model")
    tmp_dirs = [str(tmp_path / f"tmp_{run}_{worker}") for run in (1, 2) for worker in (0, 1)]
    for directory in tmp_dirs:
        os.makedirs(directory)

    # Run 1: worker 1 is killed after step 3; the chief's step 4 cannot finish.
    chief, other = workers = _run_workers(data, model_dir, tmp_dirs[:2], {1: (3, "SIGKILL")})
    assert other["code"] == -9 and chief["code"] == 3, chief["stderr"][-3000:]
    _assert_losses(chief["steps"], one_worker, [1, 2, 3])
    _assert_losses(other["steps"], one_worker, [1, 2, 3])
    latest = os.path.join(model_dir_lib.checkpoint_dir(model_dir), "ckpt-2")
    # TensorFlow's error names the task it lost (here always so far; "another worker" if not).
    assert re.match(r"Step 4: lost (worker 1|another worker) \(", chief["lost"]), chief["lost"]
    assert chief["lost"].endswith(f"); this worker stops too. Restart every worker with the same command: "
                                  f"training resumes from {latest}.")
    assert "\n" not in chief["lost"] and issubclass(distribution.WorkerLostError, OSError)  # One CLI line.
    assert model_dir_lib.latest_checkpoint(model_dir) == latest
    _only_the_chief_saved_in_the_model_dir(workers, model_dir)
    assert len(_event_files(model_dir)) == 1

    # Run 2: both restart and resume at step 2; worker 1's SIGTERM after step 4 stops both after 5.
    chief, other = workers = _run_workers(data, model_dir, tmp_dirs[2:], {1: (4, "SIGTERM")})
    assert (chief["code"], other["code"]) == (0, 0), (chief["stderr"][-3000:], other["stderr"][-3000:])
    _assert_losses(chief["steps"], one_worker, [3, 4, 5])
    _assert_losses(other["steps"], one_worker, [3, 4, 5])
    assert chief["result"] == [2, 5, "another worker's stop request"]
    assert other["result"] == [2, 5, "SIGTERM"]
    assert model_dir_lib.latest_checkpoint(model_dir).endswith("/ckpt-5")
    _only_the_chief_saved_in_the_model_dir(workers, model_dir, tmp_dirs[3])
    assert [number for number, _ in chief["saves"]] == [4, 5]
    assert len(_event_files(model_dir)) == 2  # One per run: the chief's.
