"""What LiveKit's transcript synchronizer keeps as heard, given aligned words, at every cut of a reply.

Run: ``PYTHONPATH=src python bench/livekit_synchronizer_sweep.py`` with the LiveKit to measure installed (the
main venv: 1.8.9; ``/work/venv-oldest19``: 1.8.0). Prints tables; no assertions.

A discrete-event model of ``_SegmentSynchronizerImpl._main_task`` (its arithmetic copied; the installed
LiveKit's own word tokenizer, hyphenator, ``_SpeakingRateData`` and word stream, so the 1.8.9 flush at each
``TimedString`` with an ``end_time`` is the installed one): a word is taken when it is available and the
previous one is forwarded, its wait is computed once from the curve of the annotations at that moment, and
it counts as heard once the wait is over. Checked against a real ``AgentSession`` trace (the 1.8.9 xfail
case: the model keeps the same ``'Sure, I can help '``).

Every cut from 0.30 to 2.99 s of the test reply (tests/livekit/test_livekit_heard_first_reply.py) for the
tone voices at 60 and 90 ms per character, the words arriving ``--ahead`` s before they end (generation
ahead of playback), three sets of aligned words:

* ``exact, trailing``: the true times, each word with the whitespace after it (``"Sure, "``, ``"I "``);
* ``exact, leading``: the true times, the whitespace before it (``"Sure,"``, ``" I"``: what the plugin pushes);
* LiveKit's own estimate (no aligned words: 3.83 syllables per second).

Last, the cuts of the xfail case (fast voice) with the true times, the words arriving 0.3/0.6/1.0 s ahead.

"error" is words kept minus words whose audio had fully played (tests/heard.py); "bad" counts cuts where the
kept prefix is more than one word off or worse than LiveKit's own estimate at the same cut.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import inspect
import itertools
import re

from livekit.agents import tokenize
from livekit.agents.voice.transcription import synchronizer as sync

REPLY = "Sure, I can help you. This is a test of the new booking system we built for everyone who calls."
SENTENCES = tokenize.blingfire.SentenceTokenizer().tokenize(REPLY)
FLUSHES = "word_stream.flush()" in inspect.getsource(sync._SegmentSynchronizerImpl.push_text)
_WORDS = tokenize.basic.WordTokenizer(retain_format=True, ignore_punctuation=False, split_character=True)

Push = tuple[float, str, float | None, float | None]  # (arrival s, text, start_time, end_time)


def syllables(text: str) -> int:
    words = _WORDS.tokenize(text)
    return len(list(itertools.chain.from_iterable(tokenize.basic.hyphenate_word(w) for w in words)))


def tokens(pushes: list[Push]) -> list[tuple[str, float]]:
    """The synchronizer's words with the time each becomes available (its word stream, fed as it is)."""

    async def run() -> list[tuple[str, float]]:
        stream = _WORDS.stream()
        out: list[tuple[str, float]] = []
        for arrival, text, _, end in pushes:
            stream.push_text(text)
            if end is not None and FLUSHES:
                stream.flush()
            while True:
                try:
                    out.append((stream._event_ch.recv_nowait().token, arrival))
                except Exception:
                    break
        stream.end_input()
        async for data in stream:
            out.append((data.token, pushes[-1][0]))
        return out

    return asyncio.run(run())


def heard(pushes: list[Push], cut: float) -> str:
    """The synchronized transcript at an interruption ``cut`` s into playback."""
    annotated = sync._SpeakingRateData()
    fed, now, forwarded = 0, 0.0, ""
    for word, available in tokens(pushes):
        now = max(now, available)
        while fed < len(pushes) and pushes[fed][0] <= now:
            _, text, start, end = pushes[fed]
            if start is not None or end is not None:
                annotated.add_by_annotation(text=text, start_time=start, end_time=end)
            fed += 1
        pushed = "".join(p[1] for p in pushes[:fed])
        d = 0
        if annotated.timestamps and annotated.pushed_duration >= now:
            target, n = int(annotated.accumulate_to(now)), len(forwarded)
            d = syllables(pushed[n:target]) if target >= n else -syllables(pushed[target:n])
        now += max(0.0, (syllables(word) if word.strip() else 0) - d) / sync.STANDARD_SPEECH_RATE
        if now > cut:
            break
        forwarded += word
    return forwarded


def truth(ms: float) -> list[tuple[str, float]]:
    """Each word with the time its audio ends (the tone voice: ``ms`` per character of each sentence)."""
    out, base = [], 0.0
    for s in (s.strip() for s in SENTENCES):
        out += [(m.group(), base + ms / 1000 * m.end()) for m in re.finditer(r"\S+", s)]
        base += max(100.0, ms * len(s)) / 1000
    return out


def error(kept: str, ms: float, cut: float) -> int:
    return len(kept.split()) - sum(1 for _, end in truth(ms) if end <= cut + 1e-6)


def exact(ms: float, ahead: float, *, leading: bool) -> list[Push]:
    """The true times: ``leading``, each word from the end of the previous one's sound to the end of its own;
    otherwise from the start of its sound to the start of the next word (the gap after it is its own)."""
    words = truth(ms)
    starts = [end - ms / 1000 * len(w) for w, end in words]
    out: list[Push] = []
    for i, (w, end) in enumerate(words):
        last = i == len(words) - 1
        if leading:
            text, start = ("" if i == 0 else " ") + w + (" " if last else ""), words[i - 1][1] if i else 0.0
        else:
            text, start, end = w + " ", starts[i], end if last else starts[i + 1]
        out.append((max(0.0, end - ahead), text, start, end))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ahead", type=float, default=0.6, help="seconds a word arrives before it ends")
    args = ap.parse_args()
    print(f"LiveKit synchronizer flushes at each end_time: {FLUSHES}; words arrive {args.ahead} s ahead")
    cuts = [0.30 + 0.01 * i for i in range(270)]
    for voice, ms in (("fast (60 ms/char)", 60.0), ("slow (90 ms/char)", 90.0)):
        own = [error(heard([(0.0, REPLY, None, None)], c), ms, c) for c in cuts]
        print(f"{voice}: LiveKit's own  errors {sorted(collections.Counter(own).items())}")
        for name, leading in (("exact, trailing", False), ("exact, leading", True)):
            pushes = exact(ms, args.ahead, leading=leading)
            errs = [error(heard(pushes, c), ms, c) for c in cuts]
            bad = sum(1 for e, o in zip(errs, own, strict=True) if abs(e) > 1 or abs(e) > abs(o))
            print(
                f"{voice}: {name:16} errors {sorted(collections.Counter(errs).items())}  bad {bad}/{len(cuts)}"
            )
    # the xfail case (a Kitta cut 0.25 s into the second sentence) stops at 1.57 s on 1.8.9, 1.69 s on 1.8.0
    for cut in (1.57, 1.69):
        row = {
            ahead: error(heard(exact(60.0, ahead, leading=False), cut), 60.0, cut)
            for ahead in (0.3, 0.6, 1.0)
        }
        own = error(heard([(0.0, REPLY, None, None)], cut), 60.0, cut)
        print(f"fast, cut at {cut} s: exact, trailing errors by arrival ahead {row}; LiveKit's own {own}")


if __name__ == "__main__":
    main()
