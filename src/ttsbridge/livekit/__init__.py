"""LiveKit Agents (1.8) TTS over any :class:`~ttsbridge.turns.TurnProvider`: framework logic written once.

``livekit.plugins.nineninesix`` and ``livekit.plugins.kitta`` are thin subclasses of :class:`PluginTTS` (a
:class:`TurnTTS`) that only build their provider. Everything LiveKit-specific lives in this package (the
counterpart of :mod:`ttsbridge.pipecat`): ``_tts.py`` (:class:`TurnTTS`), ``_stream.py``, ``_chunked.py``,
``_errors.py`` (:func:`to_api_error`), ``_tasks.py`` (bounded waits, the supervisor), ``_words.py``,
``_usage.py`` and
``_plugin.py`` (what the plugins share):

- :class:`TurnSynthesizeStream` (``tts.stream()``): one provider turn per stream. Text is split into
  sentences as it arrives (LiveKit's sentence tokenizer, blingfire by default) and each sentence is sent at
  once; the turn is ended at the first flush after text (LiveKit 1.8 drops text pushed after a flush, so one
  stream is one segment) or at ``end_input()``. Audio (PCM16 at the declared rate, already decoded and
  resampled by the provider) goes through the ``AudioEmitter`` as it arrives. Closing the stream before the
  turn is done (what LiveKit does on barge-in) cancels the turn on the provider, which keeps its connection
  for the next turn.
- :class:`TurnChunkedStream` (``tts.synthesize()``): the provider's one-shot streaming synthesis.
- Errors: provider errors become ``APIStatusError`` / ``APIConnectionError`` / ``APITimeoutError`` with
  ``retryable`` taken from the provider error, and forced to ``False`` once any audio reached the emitter
  (LiveKit must not replay a turn the user already heard). Texts are redacted, and the provider's exception
  chain is not attached (LiveKit prints the root cause of an ``APIConnectionError``, which may quote a URL
  with a key).
- ``APIConnectOptions.timeout`` bounds opening a turn, and is passed down as the turn's one audio-owed
  deadline (``open_turn(timeout=...)``: the provider's protocol fails the turn when the server owes audio,
  for text sent or an ended input, and stays silent that long). ``max_retry`` and ``retry_interval`` are
  applied by LiveKit's own retry loop around ``_run``.
- Estimated word timing (:class:`ttsbridge.policy.words.WordClock`, ``release="end"``) for LiveKit's aligned
  transcripts: the APIs send no timestamps.
"""

from __future__ import annotations

from ttsbridge.livekit._chunked import TurnChunkedStream
from ttsbridge.livekit._errors import to_api_error
from ttsbridge.livekit._plugin import DEFAULT_SAMPLE_RATE, PluginTTS
from ttsbridge.livekit._stream import TurnSynthesizeStream
from ttsbridge.livekit._tts import TurnTTS
from ttsbridge.livekit._usage import TURN_USAGE_EVENT, TurnUsageEvents
from ttsbridge.policy.words import DEFAULT_CHARS_PER_SECOND

__all__ = [
    "DEFAULT_CHARS_PER_SECOND",
    "DEFAULT_SAMPLE_RATE",
    "TURN_USAGE_EVENT",
    "PluginTTS",
    "TurnChunkedStream",
    "TurnSynthesizeStream",
    "TurnTTS",
    "TurnUsageEvents",
    "to_api_error",
]
