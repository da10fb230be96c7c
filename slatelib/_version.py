"""The package's version: the one place it is written. setuptools reads it into the
metadata (pyproject.toml, dynamic version), ``slatelib.__version__`` re-exports it and
``slate --version`` prints it. A base (leaf) module: it imports nothing."""

__version__ = "0.1.0"
