"""Beam jobs: command lines that parse options and compose the transforms of `tapas_tf.pipelines`.

Installed as `tapas_tf.beam_jobs`, so Beam worker processes can import them by that name.
"""
