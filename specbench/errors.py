"""The one error type the library raises for a user's mistake."""


class SpecbenchError(ValueError):
    """A usage error: bad option, bad profile, bad tensor, bad scenario file.

    The message is one sentence that names the bad value and the rule it breaks. The CLI prints
    it as one red line on stderr and exits non-zero; it never shows a traceback for one.
    """
