"""The machine a benchmark ran on: CPU model, instruction set, cores and memory.

The instruction set changes the ratios between frameworks (docs/RESULTS.md: TF against PyTorch
training went from 0.78x to 1.48x between AMD EPYCs without and with AVX-512), so every
benchmark prints `machine_line()` and stores `machine()` with its figures.
"""

from __future__ import annotations

import os
import platform
import subprocess

# Flags that decide which kernels oneDNN and XLA pick for matrix products.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """{cpu_model, avx512f, avx2, isa: [present ISA_FLAGS], cpu_count, mem_gib, platform}."""
    flags = _cpu_flags()
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            mem_gib = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu_model": _cpu_model(), "avx512f": "avx512f" in flags, "avx2": "avx2" in flags,
            "isa": [flag for flag in ISA_FLAGS if flag in flags], "cpu_count": os.cpu_count(),
            "mem_gib": mem_gib, "platform": platform.platform()}


def machine_line(m: dict | None = None) -> str:
    """One line for a results table, e.g. "2-core AMD EPYC (with AVX-512: avx2 fma avx512f ...), 23.5 GiB"."""
    m = m or machine()
    return (f"{m['cpu_count']}-core {m['cpu_model']} ({'with' if m['avx512f'] else 'without'} AVX-512: "
            f"{' '.join(m.get('isa', [])) or 'no listed ISA flag'}), {m['mem_gib']} GiB")
