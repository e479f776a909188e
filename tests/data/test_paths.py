"""ensure_writable_dir: one line naming the flag and the path, before any work starts."""

import os

import pytest

from tapas_tf.data.paths import UnwritableDirError, ensure_writable_dir

# A directory nobody can create, root included: /proc accepts no new entries.
UNCREATABLE_DIR = "/proc/tapas_tf_test/out"


def test_ensure_writable_dir_creates_and_checks(tmp_path):
    assert ensure_writable_dir(str(tmp_path / "a" / "b"), "--output_dir") == str(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir() and os.listdir(tmp_path / "a" / "b") == []  # The probe is gone.
    assert ensure_writable_dir("gs://bucket/out", "--output_dir") == "gs://bucket/out"  # Not checked here.
    (tmp_path / "file").write_text("")
    with pytest.raises(UnwritableDirError, match=r"^--output_dir=.*/file is a file, not a directory; choose"):
        ensure_writable_dir(str(tmp_path / "file"), "--output_dir")
    with pytest.raises(UnwritableDirError, match=r"^--model_dir=/proc/tapas_tf_test/out: cannot create"):
        ensure_writable_dir(UNCREATABLE_DIR, "--model_dir")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_ensure_writable_dir_read_only_directory(tmp_path):
    read_only = tmp_path / "read_only"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        with pytest.raises(UnwritableDirError, match="read_only is not writable"):
            ensure_writable_dir(str(read_only), "--output_dir")
    finally:
        read_only.chmod(0o755)
