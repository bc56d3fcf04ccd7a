"""The one exception type users see.

Anything a user can get wrong (a missing file, a bad column, a wrong key) raises `BertkitError` with a message
of one line that names the file / line / key and says what to do. The CLI prints it without a traceback and
exits non-zero; library callers can catch it.
"""


class BertkitError(Exception):
    """A user-facing error: the message is one line, names what is wrong and how to fix it."""


class ConfigValueError(BertkitError):
    """A config value that cannot work, raised where the config is built (a recipe's `Config.__post_init__`);
    `load_config` adds where `key` was set (`(from override data.max_length=1)`)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def require_packages(names: tuple[str, ...], needed_for: str, extra: str) -> None:
    """Each optional package importable, or one line naming the missing one and the extra that installs it."""
    for name in names:
        try:
            __import__(name)
        except ImportError:
            raise BertkitError(f"{needed_for}: the optional packages {', '.join(names[:-1])} and {names[-1]} are "
                               f'needed ({name} is not installed) — pip install "bertkit[{extra}]"') from None
