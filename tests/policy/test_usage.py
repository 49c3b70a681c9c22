"""The per-turn usage ledger (:mod:`ttsbridge.policy.usage`): each provider's billing rules (in its own
package, found through :mod:`ttsbridge.providers`), as a table."""

from __future__ import annotations

import pytest

from ttsbridge.kitta.billing import KITTA
from ttsbridge.nineninesix.billing import NINENINESIX
from ttsbridge.policy.usage import TurnEnd, TurnUsage, UsageMeter, UsageTotals
from ttsbridge.providers import billing_rule

# A turn's life as a script of events: ("send", text) | ("flush",) | ("audio", s) | ("unit_done", units) |
# ("heard", n) | ("done",) | ("cancelled",) | ("failed", code, by_server) | ("retry", by_server)
HELLO = "Hello there. "  # 12 characters trimmed
BYE = " Bye now. "  # 8 trimmed


def run(rule_name: str, events: list[tuple[object, ...]]) -> TurnUsage:
    meter = UsageMeter(billing_rule(rule_name), turn_id="t1")
    for name, *args in events:
        method = getattr(meter, str(name))
        if name == "failed":
            method(args[0], by_server=args[1])
        elif name == "retry":
            method(by_server=args[0])
        else:
            method(*args)
    return meter.usage


@pytest.mark.parametrize(
    ("rule", "events", "billed", "ended"),
    [
        # Nineninesix: every sent transcript is billed when it arrives ...
        ("nineninesix", [("send", HELLO)], 12, None),
        ("nineninesix", [("send", HELLO), ("send", BYE), ("audio", 1.0), ("done",)], 20, TurnEnd.DONE),
        # ... still billed on cancel, with or without audio ...
        ("nineninesix", [("send", HELLO), ("send", BYE), ("cancelled",)], 20, TurnEnd.CANCELLED),
        ("nineninesix", [("send", HELLO), ("audio", 0.3), ("cancelled",)], 12, TurnEnd.CANCELLED),
        # ... refunded when the server ends the turn with an error, even after audio ...
        (
            "nineninesix",
            [("send", HELLO), ("audio", 0.3), ("failed", "generation_failed", True)],
            0,
            TurnEnd.FAILED,
        ),
        # ... but not when the client gave up (its timeout, a dropped socket): abandoned text stays billed
        ("nineninesix", [("send", HELLO), ("failed", "timeout", False)], 12, TurnEnd.FAILED),
        # a retried concurrent_limit attempt is refunded; the replay on the fresh context is billed
        ("nineninesix", [("send", HELLO), ("retry", True), ("send", HELLO), ("done",)], 12, TurnEnd.DONE),
        # whitespace-only text is not a transcript the server bills
        ("nineninesix", [("send", "  "), ("done",)], 0, TurnEnd.DONE),
        # Kitta: text is billed per flushed segment, once its first audio arrives ...
        ("kitta", [("send", HELLO)], 0, None),
        ("kitta", [("send", HELLO), ("flush",)], 0, None),
        ("kitta", [("send", HELLO), ("flush",), ("audio", 0.2)], 12, None),
        # ... refunded before that: on cancel, on failure, whoever caused it ...
        ("kitta", [("send", HELLO), ("flush",), ("cancelled",)], 0, TurnEnd.CANCELLED),
        ("kitta", [("send", HELLO), ("flush",), ("failed", "internal_error", True)], 0, TurnEnd.FAILED),
        ("kitta", [("send", HELLO), ("flush",), ("failed", "timeout", False)], 0, TurnEnd.FAILED),
        # ... and a segment with audio stays billed when a later one is refunded
        (
            "kitta",
            [("send", HELLO), ("flush",), ("audio", 0.2), ("send", BYE), ("flush",), ("cancelled",)],
            12,
            TurnEnd.CANCELLED,
        ),
        (
            "kitta",
            [
                ("send", HELLO),
                ("flush",),
                ("audio", 0.2),
                ("unit_done", 12),
                ("send", BYE),
                ("flush",),
                ("audio", 0.1),
                ("failed", "internal_error", True),
            ],
            20,
            TurnEnd.FAILED,
        ),
        # the server's usage count replaces the estimate
        (
            "kitta",
            [("send", HELLO), ("flush",), ("audio", 0.2), ("unit_done", 11), ("done",)],
            11,
            TurnEnd.DONE,
        ),
        # a finished session committed every segment (one without audio, e.g. punctuation only, too)
        ("kitta", [("send", "..."), ("flush",), ("done",)], 3, TurnEnd.DONE),
        # text never flushed is no segment
        ("kitta", [("send", HELLO), ("cancelled",)], 0, TurnEnd.CANCELLED),
        # a retry replays only segments without audio: the failed session refunded them
        ("kitta", [("send", HELLO), ("flush",), ("retry", True), ("send", HELLO), ("flush",)], 0, None),
        (
            "kitta",
            [
                ("send", HELLO),
                ("flush",),
                ("retry", True),
                ("send", HELLO),
                ("flush",),
                ("audio", 1.0),
                ("done",),
            ],
            12,
            TurnEnd.DONE,
        ),
    ],
)
def test_billing_rules(
    rule: str, events: list[tuple[object, ...]], billed: int, ended: TurnEnd | None
) -> None:
    usage = run(rule, events)
    assert usage.characters_billed == billed
    assert usage.ended is ended
    assert usage.provider == rule and usage.turn_id == "t1"


def test_counts_sent_heard_audio_and_the_first_ending() -> None:
    usage = run(
        "kitta",
        [
            ("send", HELLO),
            ("flush",),
            ("audio", 0.5),
            ("heard", 6),
            ("audio", 0.25),
            ("heard", 7),
            ("done",),
            ("cancelled",),
            ("failed", "late", True),
            ("send", BYE),
        ],
    )
    assert usage.ended is TurnEnd.DONE and usage.error_code is None  # the first ending wins
    assert usage.characters_sent == len(HELLO) + len(BYE)
    assert usage.characters_heard == 13
    assert usage.audio_seconds == pytest.approx(0.75)
    assert usage.characters_billed == 12  # nothing is billed after the end


def test_failure_records_its_code_and_reserved_units_show_while_open() -> None:
    meter = UsageMeter(KITTA, turn_id="s1")
    meter.send(HELLO)
    meter.flush()
    assert meter.usage.characters_reserved == 12 and meter.usage.characters_billed == 0
    meter.failed("quota_exceeded", by_server=True)
    assert meter.usage.error_code == "quota_exceeded"
    assert meter.usage.characters_reserved == 0
    retried = UsageMeter(NINENINESIX)
    retried.send(HELLO)
    retried.retry(by_server=True)
    assert retried.usage.retries == 1


def test_unknown_provider_is_refused_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"kitta.*nineninesix.*'cartesia'"):
        billing_rule("cartesia")


def test_totals_and_report() -> None:
    turns = [
        run("nineninesix", [("send", HELLO), ("audio", 1.0), ("heard", 13), ("done",)]),
        run("nineninesix", [("send", HELLO), ("audio", 0.5), ("heard", 6), ("cancelled",)]),
        run("kitta", [("send", HELLO), ("flush",), ("failed", "internal_error", True)]),
    ]
    totals = UsageTotals.of(turns)
    assert totals.turns == 3
    assert totals.outcomes == {"done": 1, "cancelled": 1, "failed:internal_error": 1}
    assert (totals.characters_sent, totals.characters_billed, totals.characters_heard) == (39, 24, 19)
    assert totals.audio_seconds == pytest.approx(1.5)
    assert totals.report() == (
        "3 turns (cancelled 1, done 1, failed:internal_error 1): 39 characters sent, 24 billed, 19 heard;"
        " 1.5 s of audio"
    )
    assert UsageTotals().report() == "0 turns: 0 characters sent, 0 billed, 0 heard; 0.0 s of audio"
