"""The ``slate`` admin command line."""

from slatelib.cli.app import main

__all__ = ["main"]
