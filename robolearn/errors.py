"""One error hierarchy for input robolearn refuses.

Every exception that means "the input was wrong" (an unknown name, a malformed file, an option out
of range, a device or topic that is not there) derives from :class:`RobolearnError`; its message is
one line that names what was wrong and what is allowed. The CLI prints that line and exits 2.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class RobolearnError(Exception):
    """Bad input: the message names what was wrong and what is allowed."""


class ConfigError(RobolearnError):
    """An option or configuration value outside its valid range."""


class CorruptFileError(RobolearnError):
    """A checkpoint, dataset or exported policy on disk that is missing, truncated, altered or malformed."""
