"""Running a command to completion while sampling the peak resident memory of its process tree.

    seconds, peak_bytes = run_with_peak_rss([sys.executable, "job.py", ...], env=env)

Used by the data-job benchmarks (`create_data_memory.py`, `pretrain_data_bench.py`), whose target
is that peak memory does not grow with the input. A Beam job's DirectRunner may start worker
processes, so the whole tree is summed. Its stderr goes to a temporary file, not a pipe, so that a
talkative job cannot block on a full pipe while it is being sampled.
"""

import subprocess
import tempfile
import time
from typing import Dict, Optional, Sequence, Tuple

import psutil

SAMPLE_SECONDS = 0.05


def run_with_peak_rss(command: Sequence[str], env: Optional[Dict[str, str]] = None) -> Tuple[float, int]:
    """(wall seconds, peak RSS in bytes of the process and its children, sampled every 50 ms).

    Raises RuntimeError with the end of the command's stderr when it exits non-zero."""
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(list(command), stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        root = psutil.Process(process.pid)
        peak = 0
        while process.poll() is None:
            try:
                tree = [root] + root.children(recursive=True)
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass  # A process of the tree ended between listing and reading it.
            time.sleep(SAMPLE_SECONDS)
        seconds = time.perf_counter() - start
        if process.returncode != 0:
            stderr.seek(0)
            raise RuntimeError(stderr.read().decode(errors="replace")[-3000:])
    return seconds, peak
