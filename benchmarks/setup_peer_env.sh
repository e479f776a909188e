#!/usr/bin/env bash
# Creates (or checks) the PyTorch peer environment used only by benchmarks/.
#
#   bash benchmarks/setup_peer_env.sh              # -> .peer-env/
#   PEER_ENV=/work/peer bash benchmarks/setup_peer_env.sh
#
# Idempotent: an environment that already has the pinned versions is left alone.
# torch is pinned to 2.13.0 and must resolve to the CPU build: an unpinned torch from PyPI pulls
# gigabytes of CUDA libraries. On the project machines pip finds 2.13.0+cpu in its local wheel
# directory; elsewhere point pip at a CPU wheel (PIP_FIND_LINKS or PIP_EXTRA_INDEX_URL).
set -euo pipefail

PEER_ENV=${PEER_ENV:-.peer-env}
PYTHON=${PYTHON:-python3}
TORCH_VERSION=2.13.0
TRANSFORMERS_VERSION=4.57.6

pinned_versions_present() {
  "$PEER_ENV/bin/python" - "$TORCH_VERSION" "$TRANSFORMERS_VERSION" <<'EOF' 2>/dev/null
import sys
import numpy, pandas, safetensors, torch, transformers
ok = (
    torch.__version__.split("+")[0] == sys.argv[1]
    and transformers.__version__ == sys.argv[2]
    and int(pandas.__version__.split(".")[0]) < 3
)
sys.exit(0 if ok else 1)
EOF
}

if [ ! -x "$PEER_ENV/bin/python" ]; then
  echo "creating $PEER_ENV"
  "$PYTHON" -m venv "$PEER_ENV"
fi

if pinned_versions_present; then
  echo "$PEER_ENV already has torch $TORCH_VERSION and transformers $TRANSFORMERS_VERSION"
else
  "$PEER_ENV/bin/python" -m pip install --quiet \
    "torch==$TORCH_VERSION" "transformers==$TRANSFORMERS_VERSION" "pandas<3" numpy safetensors
  pinned_versions_present || { echo "error: $PEER_ENV does not have the pinned versions" >&2; exit 1; }
fi

"$PEER_ENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "| transformers", transformers.__version__, "| cuda", torch.version.cuda)'
