"""An image stream's pictures in the live state: the newest per image, once per delta, all of
them in a snapshot; and what the answer keeps of them when it ends (`attachments`)."""

from __future__ import annotations

import base64

from chatapp.messaging import socket_messages
from chatapp.rendering import attachments
from chatapp.rendering.image_checks import MAX_PREVIEW_BYTES, MAX_PREVIEW_IMAGES
from chatapp.streaming.live_state import LiveState
from gateway_client.accumulator import Accumulator, Completion
from gateway_client.emulator.media import png_b64
from gateway_client.events import ImageOutput

SVG = base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode()


def picture(index: int, seed: str, *, partial: bool = True, b64: str | None = None) -> ImageOutput:
    return ImageOutput(index, b64=b64 or png_b64(seed), media_type="image/png", partial=partial)


def url(seed: str) -> str:
    return "data:image/png;base64," + png_b64(seed)


def test_the_newest_preview_per_image_goes_once_in_a_delta() -> None:
    state = LiveState()
    for event in (picture(0, "a"), picture(1, "b"), picture(0, "c")):
        assert state.apply(event)
    assert state.ready(0.0)
    delta = state.take_delta()
    assert delta == {"seq": 1, "previews": [[0, url("c"), True], [1, url("b"), True]]}
    assert state.take_delta() is None, "nothing new: no delta"


def test_a_final_replaces_the_preview_and_later_deltas_carry_only_what_changed() -> None:
    state = LiveState()
    state.apply(picture(0, "a"))
    state.apply(picture(1, "b"))
    state.take_delta()
    state.apply(picture(0, "final", partial=False))
    assert state.take_delta() == {"seq": 2, "previews": [[0, url("final"), False]]}
    assert state.snapshot()["previews"] == [[0, url("final"), False], [1, url("b"), True]]


def test_previews_are_not_counted_as_attachments_or_text() -> None:
    state = LiveState()
    state.apply(picture(0, "a"))
    delta = state.take_delta()
    assert delta is not None
    assert set(delta) == {"seq", "previews"}
    snapshot = state.snapshot()
    assert snapshot["attachments"] == []
    assert snapshot["content"] == ""


def test_svg_and_oversized_pictures_are_never_sent() -> None:
    state = LiveState()
    huge = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(MAX_PREVIEW_BYTES)).decode()
    assert not state.apply(picture(0, "", b64=SVG))
    assert not state.apply(picture(1, "", b64=huge))
    assert not state.apply(picture(2, "", b64="not base64!"))
    assert not state.apply(picture(MAX_PREVIEW_IMAGES, "beyond"))
    assert not state.apply(picture(-1, "before"))
    assert state.take_delta() is None
    assert "previews" not in state.snapshot()


def test_previews_travel_in_the_compact_delta() -> None:
    state = LiveState()
    state.apply(picture(0, "a"))
    payload = socket_messages.delta(7, state.take_delta() or {})
    assert payload == [7, 1, "", "", {"previews": [[0, url("a"), True]]}]
    assert socket_messages.decode(socket_messages.group_message(payload)["text"])["previews"] == [
        [0, url("a"), True]
    ]


def completion(*events: ImageOutput) -> Completion:
    fold = Accumulator()
    for event in events:
        fold.add(event)
    return fold.completion


def test_finals_are_stored_as_checked_bytes_in_index_order() -> None:
    done = completion(picture(1, "p1"), picture(0, "p0"), picture(1, "f1", partial=False))
    done = completion(*[*done.images, picture(0, "f0", partial=False)])
    assert attachments.from_completion(done) == [
        {
            "kind": "image",
            "media_type": "image/png",
            "filename": "image-1.png",
            "data": png_b64("f0"),
            "preview": False,
        },
        {
            "kind": "image",
            "media_type": "image/png",
            "filename": "image-2.png",
            "data": png_b64("f1"),
            "preview": False,
        },
    ]


def test_a_preview_whose_final_never_came_is_kept_marked() -> None:
    (item,) = attachments.from_completion(completion(picture(0, "p0")))
    assert item["kind"] == "image"
    assert item["preview"] is True  # type: ignore[typeddict-item]


def test_a_refused_image_becomes_a_note() -> None:
    mislabelled = ImageOutput(0, b64=SVG, media_type="image/png")
    assert attachments.from_completion(completion(mislabelled)) == [
        {"kind": "note", "text": "Image 1 was not kept: it is not a PNG, JPEG, GIF or WebP image."}
    ]


def test_the_served_type_is_read_from_the_bytes_again() -> None:
    item = {"kind": "image", "media_type": "image/gif", "data": png_b64("a")}
    data = attachments.decoded(item)
    assert data is not None
    assert attachments.served_image_type(item, data) == "image/png"
    assert attachments.served_image_type({**item, "kind": "file"}, data) is None
    svg = base64.b64decode(SVG)
    assert attachments.served_image_type({**item, "data": SVG}, svg) is None
