"""Stopping a training run between steps, with a checkpoint: SIGTERM (schedulers stop and preempt
jobs with it) and SIGINT (Ctrl-C).

    with StopSignals() as stop:
        while not stop.requested:
            run_one_step()
        save_checkpoint()

The first signal only records itself (`requested`); the training loop finishes the step it is in,
saves a checkpoint and returns, and the command exits 0. A second signal stops at once, without a
checkpoint: SIGINT raises KeyboardInterrupt, SIGTERM ends the process as it would have without
the handler. Several workers agree on the step to stop at (`tapas_tf.training.trainer`).

Handlers can only be set in the main thread; a run in another thread keeps the signals' handlers,
and `requested` stays None.
"""

import logging
import os
import signal
import threading
from types import FrameType
from typing import Dict, Optional, Sequence

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """A context manager that turns SIGTERM and SIGINT into a request to stop after the step.

    Attributes:
      requested: the name of the first signal received ("SIGTERM", "SIGINT"), or None.
    """

    def __init__(self, signals: Sequence[signal.Signals] = STOP_SIGNALS):
        self._signals = tuple(signals)
        self._previous: Dict[signal.Signals, object] = {}
        self.requested: Optional[str] = None

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is not threading.main_thread():
            logging.info("Training outside the main thread: SIGTERM and SIGINT keep their handlers "
                         "(no checkpoint on the way out).")
            return self
        for sig in self._signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for sig, previous in self._previous.items():
            # None: a handler set outside Python, which cannot be set again from here (under
            # MultiWorkerMirroredStrategy, TensorFlow's preemption notifier takes SIGTERM).
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        del frame
        name = signal.Signals(signum).name
        if self.requested is None:
            self.requested = name
            logging.warning("%s: stopping after this step, with a checkpoint (send it again to stop at "
                            "once, without one).", name)
            return
        logging.warning("%s again: stopping now, without a checkpoint.", name)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
