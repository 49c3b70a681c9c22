"""The one wire-audio step shared by every Nineninesix path (WebSocket chunks, SSE events): raw bytes of the
wire encoding -> PCM16 LE, carrying an odd trailing byte of PCM16 over to the next chunk."""

from __future__ import annotations

from ttsbridge.audio.g711 import decode_to_pcm16


def wire_to_pcm16(data: bytes, encoding: str, carry: bytes = b"") -> tuple[bytes, bytes]:
    """``(pcm16, carry)`` for one chunk: ``pcm_s16le`` keeps whole samples and carries the odd byte;
    ``pcm_mulaw``/``pcm_alaw`` decode byte per sample (nothing to carry)."""
    if encoding == "pcm_s16le":
        if carry:
            data = carry + data
        if len(data) & 1:
            return data[:-1], data[-1:]
        return data, b""
    return decode_to_pcm16(data, encoding), b""


__all__ = ["wire_to_pcm16"]
