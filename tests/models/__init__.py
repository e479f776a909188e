"""Tests of the `models` package (imported as `tests.models`, since tests/ is a package)."""
