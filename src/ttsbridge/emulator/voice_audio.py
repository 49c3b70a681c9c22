"""How the emulator's voices sound: the tone voice (a sine per transcript, with fades) and eSpeak NG speech
(ctypes, one worker thread). :mod:`ttsbridge.emulator.voices` holds the catalogue of voices that use them.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ttsbridge.audio.analysis import tone
from ttsbridge.audio.resample import resample_oneshot
from ttsbridge.emulator.nineninesix.config import NATIVE_SAMPLE_RATE

__all__ = ["speech_available", "tone_duration", "tone_frequency", "tone_pcm"]

log = logging.getLogger("ttsbridge.emulator")

_TONE_BASE_HZ = 300.0
_TONE_STEP_HZ = 40.0
_TONE_STEPS = 64
_MS_PER_CHAR = 60.0
_MIN_MS = 100.0
_FADE_MS = 5.0
_AMPLITUDE = 0.5


def tone_frequency(transcript: str) -> float:
    """Frequency (Hz) of the tone voice for ``transcript`` (trimmed first): 300 + (crc32 % 64) * 40, so
    300..2820 Hz in 40 Hz steps."""
    text = transcript.strip()
    return _TONE_BASE_HZ + (zlib.crc32(text.encode("utf-8")) % _TONE_STEPS) * _TONE_STEP_HZ


def tone_duration(transcript: str, *, ms_per_char: float = _MS_PER_CHAR) -> float:
    """Seconds of tone audio for ``transcript`` (trimmed): ``ms_per_char`` (60) ms per character, at least
    100 ms."""
    return max(_MIN_MS, ms_per_char * len(transcript.strip())) / 1000.0


def tone_pcm(
    transcript: str, sample_rate: int, *, frequency: float | None = None, ms_per_char: float = _MS_PER_CHAR
) -> bytes:
    """PCM16 tone audio of ``transcript`` at ``sample_rate`` (empty transcript -> empty audio)."""
    text = transcript.strip()
    if not text:
        return b""
    freq = tone_frequency(text) if frequency is None else frequency
    pcm = tone(freq, tone_duration(text, ms_per_char=ms_per_char), sample_rate, amplitude=_AMPLITUDE)
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    n_fade = min(samples.size // 2, max(1, round(sample_rate * _FADE_MS / 1000.0)))
    ramp = np.linspace(0.0, 1.0, n_fade, endpoint=False)
    samples[:n_fade] *= ramp
    samples[samples.size - n_fade :] *= ramp[::-1]
    return np.round(samples).astype("<i2").tobytes()


# --- eSpeak NG ----------------------------------------------------------------------------------------------

_AUDIO_OUTPUT_SYNCHRONOUS = 0x02
_ESPEAK_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_ESPEAK_CHARS_UTF8 = 1
_SynthCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class _Espeak:
    """Process-wide eSpeak NG engine. Every call runs in one worker thread, under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: Any = None
        self._rate = 0
        self._failed = False
        self._buf = bytearray()
        self._callback = _SynthCallback(self._on_audio)  # keep a reference: C holds the pointer
        self._executor: ThreadPoolExecutor | None = None

    def _on_audio(self, wav: Any, numsamples: int, _events: Any) -> int:
        if numsamples > 0 and wav:
            self._buf.extend(ctypes.string_at(wav, numsamples * 2))
        return 0

    def _init_locked(self) -> bool:
        if self._lib is not None:
            return True
        if self._failed:
            return False
        try:
            import espeakng_loader

            lib = ctypes.CDLL(espeakng_loader.get_library_path())
            lib.espeak_Initialize.restype = ctypes.c_int
            lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
            lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
            lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
            lib.espeak_SetVoiceByName.restype = ctypes.c_int
            lib.espeak_Synth.argtypes = [
                ctypes.c_char_p,
                ctypes.c_size_t,
                ctypes.c_uint,
                ctypes.c_int,
                ctypes.c_uint,
                ctypes.c_uint,
                ctypes.c_void_p,
                ctypes.c_void_p,
            ]
            lib.espeak_Synth.restype = ctypes.c_int
            lib.espeak_Synchronize.restype = ctypes.c_int
            data = espeakng_loader.get_data_path().encode()
            rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data, _ESPEAK_INITIALIZE_DONT_EXIT)
            if rate <= 0:
                raise RuntimeError(f"espeak_Initialize returned {rate}")
            lib.espeak_SetSynthCallback(self._callback)
            if lib.espeak_SetVoiceByName(b"en-us") != 0 and lib.espeak_SetVoiceByName(b"en") != 0:
                raise RuntimeError("no English eSpeak voice")
        except Exception as exc:  # missing wheel, missing library, broken data...
            log.info("eSpeak NG unavailable (%s): the speech voice is disabled", type(exc).__name__)
            self._failed = True
            return False
        self._lib = lib
        self._rate = rate
        return True

    def available(self) -> bool:
        with self._lock:
            return self._init_locked()

    def synthesize_blocking(self, text: str) -> bytes:
        """PCM16 at 22050 Hz (resampled if the library runs at another rate)."""
        with self._lock:
            if not self._init_locked():
                raise RuntimeError("eSpeak NG is not available")
            self._buf = bytearray()
            data = text.encode("utf-8")
            err = self._lib.espeak_Synth(
                data, len(data) + 1, 0, _POS_CHARACTER, 0, _ESPEAK_CHARS_UTF8, None, None
            )
            if err != 0:
                raise RuntimeError(f"espeak_Synth failed ({err})")
            self._lib.espeak_Synchronize()
            pcm = bytes(self._buf)
            self._buf = bytearray()
            rate = self._rate
        if rate != NATIVE_SAMPLE_RATE:
            pcm = resample_oneshot(pcm, rate, NATIVE_SAMPLE_RATE)
        return pcm

    async def synthesize(self, text: str) -> bytes:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="espeak")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.synthesize_blocking, text)


_ESPEAK = _Espeak()


def speech_available() -> bool:
    """Whether the eSpeak NG speech voice can be used (loads the library on first call)."""
    return _ESPEAK.available()
