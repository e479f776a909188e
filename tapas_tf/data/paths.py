"""Checks on the directories a job writes to, made before any work starts.

    output_dir = ensure_writable_dir(FLAGS.output_dir, "--output_dir")

A job that finds out at its end that it cannot write its output has wasted its run, and the
error it meets there (FileExistsError from deep in Beam, a TensorFlow OpError) rarely names the
flag to change. `ensure_writable_dir` fails first, in one line naming the flag, the path and
what to do.
"""

import os
import tempfile
from typing import Optional


class UnwritableDirError(ValueError):
    """A directory named on the command line cannot be created or written to."""


def _is_remote(path: str) -> bool:
    """gs://, s3:// and other URLs: the local file system cannot check them."""
    return "://" in path


def _first_existing_ancestor(path: str) -> Optional[str]:
    """The nearest existing path at or above `path` (None only if nothing exists, as on a bad drive)."""
    current = os.path.abspath(path)
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return current


def _check_not_a_file(path: str, flag: str) -> None:
    """Raises if `path`, or a directory it would be created in, is a file."""
    existing = _first_existing_ancestor(path)
    if existing is None or os.path.isdir(existing):
        return
    if existing == os.path.abspath(path):
        raise UnwritableDirError(f"{flag}={path} is a file, not a directory; choose another {flag}")
    raise UnwritableDirError(f"{flag}={path}: {existing} is a file, not a directory; choose another {flag}")


def _check_can_write(path: str, flag: str) -> None:
    """Creates and deletes a file in `path`: the only check that works for every cause (mode bits,
    ACLs, read-only mounts, pseudo file systems such as /proc)."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".tapas_tf_write_check_", dir=path)
        os.close(handle)
        os.remove(probe)
    except OSError as e:
        raise UnwritableDirError(
            f"{flag}={path} is not writable ({e.strerror}); choose a directory you can write to") from e


def ensure_writable_dir(path: str, flag: str) -> str:
    """Creates directory `path` if needed and checks that files can be written in it.

    Args:
      path: the directory; remote paths (`gs://...`) are returned unchecked.
      flag: the command-line flag that named it (for example "--output_dir"), quoted in errors.

    Returns:
      `path`, unchanged.

    Raises:
      UnwritableDirError (a ValueError): `path` or one of its parents is a file, or the directory
        cannot be created or written to. The one-line message names `flag` and `path`.
    """
    if _is_remote(path):
        return path
    _check_not_a_file(path, flag)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        where = e.filename or path  # The level that failed, e.g. /proc/new of /proc/new/out.
        raise UnwritableDirError(f"{flag}={path}: cannot create {where} ({e.strerror}); "
                                 "choose a directory you can write to") from e
    _check_can_write(path, flag)
    return path
