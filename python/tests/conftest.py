"""pytest setup for lazyfuse's Python tests.

The tests import the installed package (pip install . at the repository
root). In a build tree without installing, set LAZYFUSE_LIBRARY to the built
liblazyfuse.so and PYTHONPATH to python/ instead (the README says how).
"""
import gc

import pytest


@pytest.fixture
def ctx():
    import lazyfuse
    c = lazyfuse.Context(backend="cpu", threads=2)
    yield c
    gc.collect()
