"""SEM-2, SEM-7: the embedding providers (the bundled model's pins, an operator's ONNX
directory, an OpenAI-compatible endpoint against a local stand-in implementing the documented
request and answer) and `aidememo serve` indexing in the background and searching by meaning
over a real socket, with `/ready` reporting the indexer's lag; `aidememo indexer` as its own
process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from aidememo.domain.errors import AidememoError, ErrorCode
from aidememo.domain.semantic import unpack
from tests.origin.test_serve_process import REPO, ServeProcess

pytest.importorskip("onnxruntime")
from aidememo.embedding import load_embedder
from aidememo.embedding.bundled import MODEL_SHA256, _verified, bundled_files
from aidememo.embedding.onnx_model import load_onnx_dir

AUTH_SEEN: list[str | None] = []


class _StandIn(BaseHTTPRequestHandler):
    """`POST /v1/embeddings` as the OpenAI API documents it; vectors from the text's length."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        AUTH_SEEN.append(self.headers.get("authorization"))
        assert self.path == "/v1/embeddings" and body["encoding_format"] == "float"
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0, 2.0]}
            for i, t in enumerate(body["input"])
        ]
        answer = json.dumps({"object": "list", "data": data[::-1], "model": body["model"]})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_sem2_bundled_model_is_pinned_and_a_changed_file_is_refused(tmp_path: Path) -> None:
    model, tokenizer = bundled_files()
    copy = tmp_path / "model.onnx"
    shutil.copyfile(model, copy)
    with copy.open("r+b") as f:
        f.seek(1000)
        f.write(b"\x00\x01")
    with pytest.raises(AidememoError) as refused:
        _verified(copy, MODEL_SHA256)
    assert refused.value.code is ErrorCode.SEMANTIC_UNAVAILABLE
    embedder = load_embedder()
    assert embedder.fingerprint.dimensions == 384 and tokenizer.name == "tokenizer.json"


def test_sem2_an_onnx_directory_gives_the_same_vectors_under_its_own_fingerprint(
    tmp_path: Path,
) -> None:
    model, tokenizer = bundled_files()
    (tmp_path / "mini").mkdir()
    shutil.copyfile(model, tmp_path / "mini" / "model.onnx")
    shutil.copyfile(tokenizer, tmp_path / "mini" / "tokenizer.json")
    local = load_onnx_dir(str(tmp_path / "mini"))
    assert (local.fingerprint.provider, local.fingerprint.model) == ("onnx-dir", "mini")
    assert local.embed(["pool exhausted"]) == load_embedder().embed(["pool exhausted"])
    with pytest.raises(AidememoError):
        load_onnx_dir(str(tmp_path))


def test_sem2_openai_compatible_endpoint_key_from_the_environment(
    stand_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    AUTH_SEEN.clear()
    monkeypatch.setenv("AIDEMEMO_EMBEDDING_API_KEY", "sk-test-key")
    embedder = load_embedder(f"openai:{stand_in}#text-embed-small")
    assert embedder.fingerprint.dimensions == 4
    assert embedder.fingerprint.provider == "openai-compatible"
    first, second = (unpack(v) for v in embedder.embed(["ab", "abcd"]))
    assert first[0] == pytest.approx(2 / (4 + 1 + 4) ** 0.5, rel=1e-6)  # normalised, in order
    assert second[0] == pytest.approx(4 / (16 + 1 + 4) ** 0.5, rel=1e-6)
    assert AUTH_SEEN[-1] == "Bearer sk-test-key"
    with pytest.raises(AidememoError) as down:
        load_embedder("openai:http://127.0.0.1:9/v1#m")
    assert down.value.code is ErrorCode.SEMANTIC_UNAVAILABLE


def _post_fact(client: httpx.Client, auth: dict[str, str], fid: str, text: str) -> int:
    answer = client.post(
        "/v1/projects/demo/facts",
        headers=auth,
        json={"command_id": f"c-{fid}", "payload": {"fact_id": fid, "session_id": "s1",
                                                     "content": text}},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    return int(answer.json()["project_seq"])


def test_sem7_serve_indexes_in_the_background_and_searches_by_meaning(
    tmp_path: Path, home: Path, token: str
) -> None:
    server = ServeProcess(home, tmp_path / "serve.log")
    auth = {"authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=server.url, timeout=10.0) as client:
            created = client.post(
                "/v1/projects/demo/sessions",
                headers=auth,
                json={"command_id": "c-s1", "payload": {"session_id": "s1", "topic": "ops"}},
            )
            assert created.status_code == 200, created.text
            _post_fact(client, auth, "f_tabs", "we indent with four spaces, never tabs")
            seq = _post_fact(
                client, auth, "f_oom", "the worker was killed for using too much memory"
            )
            found = client.get(
                "/v1/projects/demo/search",
                headers=auth,
                params={"q": "process ran out of RAM", "mode": "hybrid", "at_least_seq": seq},
            ).json()
            assert found["mode"] == "hybrid", found
            assert found["results"][0]["fact_id"] == "f_oom"
            assert found["semantic_model"]["provider"] == "bundled"
            deadline = time.monotonic() + 10
            while True:  # the child reports its status after a step: wait for that report
                ready = client.get("/ready").json()
                reported = ready["semantic"]["facts_indexed"] == 2
                if (
                    reported and ready["semantic"]["index_lag"] == 0
                ) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert ready["ready"] and ready["semantic"]["index_lag"] == 0
            assert ready["semantic"]["facts_indexed"] == 2
        code, _ = server.terminate()
        assert code == 0
    finally:
        server.kill()
    indexed = subprocess.run(
        [sys.executable, "-m", "aidememo", "indexer", "--once", "--database",
         str(home / "ssot.sqlite")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert "indexed 0 facts, lag 0" in indexed.stdout  # serve had caught up already
