"""Images and audio in chat requests: checks, the parts each transport sends, cache keys."""

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.media import Media, MediaError, load_media, with_media
from tests.media_files import png_bytes, wav_bytes, write

CAP = 1 << 20


def _endpoint(server, transport="lean", **extra):
    return EndpointConfig.from_dict(
        {
            "backend": "openai",
            "model": "vision-model",
            "base_url": server.base_url,
            "transport": transport,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
            **extra,
        },
        name="vision",
    )


def _request(text, *media, **sampling):
    return ChatRequest(messages=({"role": "user", "content": with_media(text, media)},), **sampling)


def test_types_come_from_the_bytes_not_the_name(tmp_path):
    write(tmp_path / "pic.png", png_bytes())
    write(tmp_path / "clip.wav", wav_bytes())
    write(tmp_path / "sound.png", wav_bytes())  # a WAV named like a PNG
    png = load_media("pic.png", "image", tmp_path, CAP)
    assert (png.format, png.mime, png.source) == ("png", "image/png", str(tmp_path / "pic.png"))
    assert png.sha256 == hashlib.sha256(png_bytes()).hexdigest()
    assert load_media("clip.wav", "audio", tmp_path, CAP).format == "wav"
    with pytest.raises(MediaError, match=r"sound.png: wav data \(by its content\); image must"):
        load_media("sound.png", "image", tmp_path, CAP)
    jpeg = write(tmp_path / "x.bin", b"\xff\xd8\xff\xe0" + bytes(20))
    webp = write(tmp_path / "y.bin", b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(8))
    mp3 = write(tmp_path / "z.bin", b"ID3\x04" + bytes(20))
    assert load_media(str(jpeg), "image", tmp_path, CAP).mime == "image/jpeg"
    assert load_media(str(webp), "image", tmp_path, CAP).mime == "image/webp"
    assert load_media(str(mp3), "audio", tmp_path, CAP).mime == "audio/mpeg"


@pytest.mark.parametrize(
    ("source", "kind", "problem"),
    [
        ("missing.png", "image", "missing.png: no such file"),
        ("notes.png", "image", "not a known image or audio format"),
        ("big.png", "image", "over the endpoint's max_media_bytes 100"),
        ("data:image/png;base64,***", "image", "not valid base64"),
        ("data:image/png,abc", "image", "must be data:<type>;base64,<data>"),
        ("https://example.org/a.wav", "audio", "audio must be a file or a data: URI"),
        ("pic.png", "audio", "png data .* audio must be WAV/MP3"),
    ],
)
def test_bad_sources_say_what_is_wrong(tmp_path, source, kind, problem):
    write(tmp_path / "notes.png", b"just text, named .png")
    write(tmp_path / "big.png", png_bytes(width=64, height=64))
    write(tmp_path / "pic.png", png_bytes())
    with pytest.raises(MediaError, match=problem):
        load_media(source, kind, tmp_path, 100 if source == "big.png" else CAP)


def test_data_uris_and_urls(tmp_path):
    uri = "data:image/png;base64," + base64.b64encode(png_bytes()).decode()
    inline = load_media(uri, "image", tmp_path, CAP)
    assert inline.source == "inline" and inline.read() == png_bytes()
    url = load_media("https://example.org/cat.jpg", "image", tmp_path, CAP)
    assert url.is_url and url.identity() == {"kind": "image", "url": "https://example.org/cat.jpg"}
    assert url.openai_part() == {
        "type": "image_url",
        "image_url": {"url": "https://example.org/cat.jpg"},
    }


@pytest.mark.parametrize("transport", ["lean", "sdk"])
def test_both_transports_send_the_exact_parts(fake_llm, tmp_path, transport):
    image = load_media(str(write(tmp_path / "a.png", png_bytes())), "image", tmp_path, CAP)
    clip = load_media(str(write(tmp_path / "a.wav", wav_bytes())), "audio", tmp_path, CAP)
    with LLMClient(_endpoint(fake_llm, transport), None, progress=False) as client:
        result = client.complete(_request("What is shown and said?", image, clip))
    assert result.ok
    (body,) = fake_llm.requests
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is shown and said?"},
                {
                    "type": "image_url",
                    "image_url": {
                        "url": "data:image/png;base64," + base64.b64encode(png_bytes()).decode()
                    },
                },
                {
                    "type": "input_audio",
                    "input_audio": {
                        "data": base64.b64encode(wav_bytes()).decode(),
                        "format": "wav",
                    },
                },
            ],
        }
    ]


def test_the_cache_keys_on_the_content_not_the_path(fake_llm, tmp_path):
    cache = tmp_path / "cache.sqlite"
    path = write(tmp_path / "photo.png", png_bytes(rgb=(255, 0, 0)))

    def ask(source: Path):
        image = load_media(str(source), "image", tmp_path, CAP)
        with LLMClient(_endpoint(fake_llm), cache, progress=False) as client:
            return client.complete(_request("Which colour?", image, temperature=0.0))

    assert not ask(path).cached
    assert ask(path).cached and fake_llm.request_count == 1

    write(path, png_bytes(rgb=(0, 0, 255)))  # same path, other bytes: a new question
    assert not ask(path).cached
    assert fake_llm.request_count == 2

    renamed = path.rename(tmp_path / "renamed.png")  # same bytes, other name: answered
    assert ask(renamed).cached
    assert fake_llm.request_count == 2


def test_a_text_request_keeps_the_key_it_had_before_media(tmp_path):
    request = ChatRequest.from_prompt("Rate this.", system="Judge.", temperature=0.0, stop=["x"])
    # The key exactly as it was computed before messages could carry media.
    payload = {
        "backend": "openai:http://h/v1",
        "model": "m",
        "messages": request.messages,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 1024,
        "stop": ("x",),
        "seed": None,
        "json_schema": None,
        "attempt": 0,
    }
    before = hashlib.sha256(
        json.dumps(payload, sort_keys=True, ensure_ascii=False, default=list).encode()
    ).hexdigest()
    assert request.cache_key("openai:http://h/v1", "m") == before
    image = load_media(str(write(tmp_path / "a.png", png_bytes())), "image", tmp_path, CAP)
    assert _request("Rate this.", image).cache_key("openai:http://h/v1", "m") != before


def test_a_file_changed_after_its_check_fails_that_call_only(fake_llm, tmp_path):
    path = write(tmp_path / "a.png", png_bytes())
    image = load_media(str(path), "image", tmp_path, CAP)
    write(path, png_bytes(rgb=(1, 2, 3)))
    with LLMClient(_endpoint(fake_llm, max_retries=0), None, progress=False) as client:
        changed, fine = client.complete_many([_request("A?", image), _request("B?")])
    assert changed.error == f"{path}: changed after it was checked; run again"
    assert fine.ok and fake_llm.request_count == 1


def test_messages_reject_anything_but_text_and_media():
    with pytest.raises(ValueError, match="malformed chat message"):
        ChatRequest(messages=({"role": "user", "content": ("text", b"raw bytes")},))
    with pytest.raises(ValueError, match="malformed chat message"):
        ChatRequest(messages=({"role": "user", "content": ()},))
    media = Media("image", "png", "/x.png", "ab" * 32)
    assert ChatRequest(messages=({"role": "user", "content": ("t", media)},)).media == [media]


def test_a_directory_or_a_fifo_given_as_an_image_is_named_as_such(tmp_path):
    (tmp_path / "photos").mkdir()
    with pytest.raises(MediaError, match=r"photos: a directory, not a file"):
        load_media("photos", "image", tmp_path, CAP)
    os.mkfifo(tmp_path / "pipe.png")
    with pytest.raises(MediaError, match=r"pipe.png: not a regular file \(a pipe"):
        load_media("pipe.png", "image", tmp_path, CAP)
