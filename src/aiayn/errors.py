"""The one base class of every error a user can fix.

The command line catches ``AiaynError`` once and prints its message as a single line (exit
status 2); any other exception reaching it is a bug and keeps its traceback. Each layer
subclasses it for its own errors (``ConfigError``, ``CorpusError``, ``ModelLoadError``, ...),
so library callers can catch one layer's errors or all of them.

This module imports nothing, so every other module may import it.
"""


class AiaynError(Exception):
    """A mistake in the user's input, files or options, said in one line that names the
    file, option or field at fault."""


class ConfigError(AiaynError, ValueError):
    """A configuration that cannot be used: unknown key, wrong type or bad value (a config
    file's, or a frozen settings value's such as ``SearchOptions``)."""
