"""The Nineninesix voices routes: list, get, clone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from ttsbridge.emulator.nineninesix.wire import EMULATOR_KEY, TRUE_WORDS, http_check_key, json_error
from ttsbridge.emulator.voices import VoiceNotFoundError

if TYPE_CHECKING:
    from ttsbridge.emulator.host import EmulatorHost

__all__ = ["handle_voice_clone", "handle_voice_get", "handle_voices_list"]


async def handle_voices_list(request: web.Request) -> web.Response:
    emu: EmulatorHost = request.app[EMULATOR_KEY]
    if (denied := http_check_key(request)) is not None:
        return denied
    q = request.query
    try:
        limit = int(q.get("limit", "10"))
    except ValueError:
        return json_error(400, "invalid_request", "limit must be an integer")
    if not 1 <= limit <= 100:
        return json_error(400, "invalid_request", "limit must be between 1 and 100")
    voices = emu.voices.all_voices()
    if (search := q.get("q")) is not None:
        s = search.lower()
        voices = [v for v in voices if s in v.name.lower() or s in v.description.lower() or s in v.id.lower()]
    if (gender := q.get("gender")) is not None:
        voices = [v for v in voices if v.gender == gender]
    if (is_owner := q.get("is_owner")) is not None:
        want = is_owner.lower() in TRUE_WORDS
        voices = [v for v in voices if v.is_owner == want]
    ids = [v.id for v in voices]
    after, before = q.get("starting_after"), q.get("ending_before")
    if after is not None:
        if after not in ids:
            return json_error(400, "invalid_request", f"starting_after: unknown voice id {after!r}")
        start = ids.index(after) + 1
        page = voices[start : start + limit]
        has_more = start + limit < len(voices)
    elif before is not None:
        if before not in ids:
            return json_error(400, "invalid_request", f"ending_before: unknown voice id {before!r}")
        end = ids.index(before)
        page = voices[max(0, end - limit) : end]
        has_more = end - limit > 0
    else:
        page = voices[:limit]
        has_more = limit < len(voices)
    return web.json_response(
        {
            "data": [v.to_api() for v in page],
            "has_more": has_more,
            "next_page": page[-1].id if has_more and page else None,
        }
    )


async def handle_voice_get(request: web.Request) -> web.Response:
    emu: EmulatorHost = request.app[EMULATOR_KEY]
    if (denied := http_check_key(request)) is not None:
        return denied
    try:
        voice = emu.voices.get(request.match_info["voice_id"])
    except VoiceNotFoundError:
        return json_error(404, "voice_not_found", "voice not found")
    return web.json_response(voice.to_api())


async def handle_voice_clone(request: web.Request) -> web.Response:
    emu: EmulatorHost = request.app[EMULATOR_KEY]
    if (denied := http_check_key(request)) is not None:
        return denied
    if not request.content_type.startswith("multipart/"):
        return json_error(400, "invalid_request", "send multipart/form-data with a clip file and a name")
    fields: dict[str, str] = {}
    clip: bytes | None = None
    reader = await request.multipart()
    while True:
        part = await reader.next()
        if part is None:
            break
        if not hasattr(part, "name") or not hasattr(part, "read"):
            continue
        name = part.name or ""
        data = await part.read(decode=False)  # type: ignore[union-attr]
        if name == "clip":
            clip = bytes(data)
        else:
            fields[name] = bytes(data).decode("utf-8", "replace")
    if not clip:
        return json_error(400, "invalid_request", "missing required file field 'clip'")
    name = fields.get("name", "").strip()
    if not name:
        return json_error(400, "invalid_request", "missing required field 'name'")
    voice = emu.voices.clone(
        name=name, clip=clip, language=fields.get("language", "en"), description=fields.get("description", "")
    )
    data = voice.to_api()
    data["user_id"] = "emulator"
    return web.json_response(data)
