"""Property: random replies from every class, cut into random tokens, sent as the adapters send them
(clauses through the coalescer, or sentences), interrupted at a random audio position. The words the clock
released (what the frameworks keep as heard) are a prefix of the LLM's text ending on a word boundary, never
inside a rewritten span, and every rewritten span in them was all played; played to the end, all of it.

The voice is simulated by the clock's own weights at a true rate no slower than the clock's prior (so the
estimate is never early), in chunks of random length; "kitta" reports each send's end (``rendered``) as
Kitta's ``usage`` does. The same properties through the real adapters: tests/pipecat/test_pipecat_spoken.py,
tests/livekit/test_livekit_spoken.py.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replies import check_heard, normalizer, replies, tokens
from ttsbridge.policy.coalesce import TokenCoalescer
from ttsbridge.policy.word_units import spoken_weight
from ttsbridge.policy.words import SpeechRate, TimedWord, WordClock
from ttsbridge.text import Normalized, split_sentences

NORM = normalizer()


def pieces_of(toks: list[str], mode: str, max_chars: int) -> list[Normalized]:
    """What an adapter sends: the normalizer's output for each piece (clauses or sentences), then its flush."""
    stream = NORM.stream()
    out: list[Normalized] = []
    if mode == "clauses":
        coalescer = TokenCoalescer(max_chars)
        for tok in toks:
            clause = coalescer.push(tok)
            if clause:
                out.append(stream.push(clause))
        out.append(stream.push(coalescer.flush()))
    else:
        for sentence in split_sentences("".join(toks)):
            out.append(stream.push(sentence + " "))
    out.append(stream.flush())
    return [p for p in out if p]


@settings(
    max_examples=int(os.environ.get("TTSBRIDGE_TEXT_EXAMPLES", 150)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    data=st.data(),
    text=replies(),
    mode=st.sampled_from(["clauses", "sentences"]),
    release=st.sampled_from(["start", "end"]),
    kitta=st.booleans(),
    max_chars=st.integers(12, 80),
    rate=st.floats(15.0, 25.0),
    cut=st.floats(0.0, 1.2),
)
def test_heard_text_is_the_llms_own_prefix(
    data: st.DataObject,
    text: str,
    mode: str,
    release: str,
    kitta: bool,
    max_chars: int,
    rate: float,
    cut: float,
) -> None:
    toks = data.draw(tokens(text))
    pieces = pieces_of(toks, mode, max_chars)
    written = "".join(p.written for p in pieces)
    if mode == "clauses":
        assert written == text  # every character of the LLM's text, once, in order
    clock = WordClock(
        SpeechRate(), release=release, pieces=kitta and release == "start", hold=release == "start"
    )
    # the spoken form each rewritten span ends at, in the (true) audio: weights at `rate`
    sends: list[tuple[str, float]] = []  # (spoken text sent, its audio seconds)
    span_ends: list[tuple[int, int, float]] = []  # (written start, end, true end of its audio)
    w_at = sent_chars = 0
    t = 0.0
    reports: list[tuple[int, float]] = []
    for piece in pieces:
        spoken = piece.sendable
        clock.add_spans(piece.spans, boundary=mode == "sentences", piece=bool(spoken))
        weight = 0
        for span in piece.spans:
            weight += spoken_weight(span.spoken) if span.rewritten else spoken_weight(span.written)
            if span.rewritten:
                span_ends.append((w_at, w_at + len(span.written), t + weight / rate))
            w_at += len(span.written)
        if spoken:
            dur = spoken_weight(spoken) / rate
            sends.append((spoken, dur))
            t += dur
            sent_chars += len(spoken)
            reports.append((sent_chars, t))
    total = t
    stop_at = cut * total
    heard: list[TimedWord] = []
    got = 0.0
    applied = 0
    chunks = data.draw(st.lists(st.floats(0.01, 0.25), min_size=1, max_size=400))
    for step in chunks:
        if got >= min(stop_at, total) - 1e-12:
            break
        step = min(step, min(stop_at, total) - got)
        got += step
        heard += clock.add_audio(step, due_s=got)
        if clock.pieces:
            done = [r for r in reports[applied:] if r[1] <= got + 1e-9]
            applied += len(done)
            heard += clock.complete_rendered(reports[:applied])
    finished = stop_at >= total
    if finished:
        heard += clock.end_segment()
    said = "".join(w.text for w in heard)
    ranges = [(a, b) for a, b, _ in span_ends]
    check_heard(said, written, ranges)
    if finished:
        assert said == written.rstrip() or said == written
    else:
        for a, b, end in span_ends:
            if b <= len(said):
                assert end <= got + 1e-6, (written[a:b], end, got)  # every rewritten span kept was all played


ALPHABET = st.sampled_from(
    [*list("abcXYZ019 .,:;!?-–/$€£%@#&*_`[]()<>|~\n'\"’“”🎉é"), "km", "pm", "USD", "+1 ", "www.", "**"]
)


@settings(max_examples=int(os.environ.get("TTSBRIDGE_TEXT_EXAMPLES", 300)), deadline=None)
@given(
    text=st.lists(ALPHABET, max_size=40).map("".join), language=st.sampled_from(["en", "es", "en-GB", "fr"])
)
def test_any_text_maps_back_exactly(text: str, language: str) -> None:
    """Whatever the text: no error, the written form is the text, each rewritten span is whole words."""
    from ttsbridge.text import TextNormalizer

    out = TextNormalizer(language=language).normalize(text)
    assert out.written == text
    at = 0
    for span in out.spans:
        if span.rewritten:
            assert at == 0 or text[at - 1].isspace(), (text, span)
            end = at + len(span.written)
            assert end == len(text) or text[end].isspace(), (text, span)
        at += len(span.written)
