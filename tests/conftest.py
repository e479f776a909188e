"""Test-session set-up: the project's TensorFlow defaults apply before any test module loads TF.

`import tapas_tf` sets them (oneDNN's CPU kernels on unless TF_ENABLE_ONEDNN_OPTS is set), and
TensorFlow reads them once, when it is first imported; some test modules import TensorFlow
before anything of ours, so without this the default would depend on the collection order.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tapas_tf  # noqa: E402,F401
