"""One exception type for everything a user can fix: the CLI prints it as one line and exits 2."""


class TraacError(Exception):
    """A configuration, input or data error with a message that names the problem and the fix."""


def first_line(err: BaseException) -> str:
    """A library exception's first line, for a one-line TraacError naming its cause."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
