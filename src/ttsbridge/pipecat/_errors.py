"""Translate the verdict a ttsbridge error carries into Pipecat's terms. Nothing is decided here.

The verdict (category, retryable, fatal) is decided once, framework-neutrally, in :mod:`ttsbridge.errors`.
Pipecat 1.14 reports a fatal error by making the processor *unusable* (a permanent ``ErrorCategory`` or
``push_error(..., force_treat_as_permanent=True)``); the worker then applies its ``ProcessorUnusablePolicy``
(``CANCEL`` does what the deprecated ``ErrorFrame.fatal=True`` did). Non-fatal errors end the turn they hit
and leave the service usable. Our ``fatal`` means what Pipecat's ``ErrorCategory.is_permanent`` means:
retrying the same configuration can never succeed; running out of credits (``QUOTA``) is not that.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.utils.errors import ErrorCategory

from ttsbridge.errors import ErrorCategory as Category
from ttsbridge.errors import verdict_of

#: Our categories in Pipecat's vocabulary: the same names, but Pipecat has no TIMEOUT (a timed-out wait is a
#: connectivity failure there, as Pipecat's own ``classify_http_exception`` files ``TimeoutError``).
PIPECAT_CATEGORY: dict[Category, ErrorCategory] = {
    c: ErrorCategory.CONNECTIVITY if c is Category.TIMEOUT else ErrorCategory[c.name] for c in Category
}


@dataclass(frozen=True)
class ErrorVerdict:
    """How the Pipecat service reports an error."""

    category: ErrorCategory
    #: The service can do no more work until its configuration (key, voice, model, format) changes.
    fatal: bool


def classify(exc: BaseException) -> ErrorVerdict:
    """Pipecat's category for ``exc`` and whether it makes the service unusable (``force_treat_as_permanent``)."""
    verdict = verdict_of(exc)
    return ErrorVerdict(PIPECAT_CATEGORY[verdict.category], verdict.fatal)
