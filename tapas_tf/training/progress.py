"""Progress of a training run: the progress bar, log lines and TensorBoard scalars."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Dict, Optional  # noqa: E402

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.training.config import TrainConfig  # noqa: E402


class TrainProgress:
    """Step counting, the progress bar, log lines and TensorBoard scalars of one run.

    Args:
      config: gives train_steps, train_batch_size, log_steps and show_progress.
      start: the step the run starts from (0, or the restored step).
      chief: only the chief worker writes summaries and draws the bar.
      summary_dir: where the TensorBoard event files go.

    Every log_steps, the means of the step values over the steps since the last log (the first
    step of a run, which traces and compiles, is left out of means and rates), the current
    learning rate and examples per second go to TensorBoard and to a log line.
    """

    def __init__(self, config: TrainConfig, start: int, chief: bool, summary_dir: str):
        self.config = config
        self.step = start
        self.start = start
        self.last_logged: Dict[str, float] = {}
        self._sums: Dict[str, float] = {}
        self._steps_in_interval = 0
        self._interval_start: Optional[float] = None  # Set after the first step, which compiles.
        self._writer = (tf.summary.create_file_writer(summary_dir) if chief
                        else tf.summary.create_noop_writer())
        self._progress = None
        if config.show_progress and chief:
            # One line per 30 s in a log file; a live bar on a terminal.
            interval = 0.5 if sys.stdout.isatty() else 30.0
            self._progress = tf_keras.utils.Progbar(
                config.train_steps - start, interval=interval,
                stateful_metrics=("loss", "examples/s"), unit_name="step")
        logging.info("Training from step %d to %d, %d examples per step%s.", start, config.train_steps,
                     config.train_batch_size, " (the progress bar counts from there)" if start else "")

    def after_step(self, values: Dict[str, float]) -> None:
        self.step += 1
        now = time.perf_counter()
        if self._interval_start is None:
            self._interval_start = now
        else:
            self._steps_in_interval += 1
            for name, value in values.items():
                self._sums[name] = self._sums.get(name, 0.0) + value
        if self._progress is not None:
            shown = [("loss", values["total_loss"])]
            if self._steps_in_interval:
                shown.append(("examples/s", self._rate(now)))
            self._progress.update(self.step - self.start, shown)
        if self.step % self.config.log_steps == 0 or self.step == self.config.train_steps:
            self._log(values, now)

    def _rate(self, now: float) -> float:
        if not self._steps_in_interval:
            return 0.0
        return self._steps_in_interval * self.config.train_batch_size / (now - self._interval_start)

    def _log(self, values: Dict[str, float], now: float) -> None:
        """Means over the interval (the step's own values when the interval is only the first step)."""
        count = self._steps_in_interval
        means = {name: self._sums[name] / count for name in self._sums} if count else dict(values)
        means["examples_per_second"] = self._rate(now)
        means["learning_rate"] = values["learning_rate"]  # The current rate, not a mean.
        with self._writer.as_default():
            for name, value in means.items():
                tf.summary.scalar(name, value, step=self.step)
        self._writer.flush()
        logging.info("step %d/%d: %s", self.step, self.config.train_steps,
                     ", ".join(f"{name} {value:.5g}" for name, value in sorted(means.items())))
        self.last_logged = means
        self._sums, self._steps_in_interval, self._interval_start = {}, 0, now

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()
