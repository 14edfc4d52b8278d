"""An OpenAI-compatible embeddings endpoint (SPEC.md SEM-2): `POST {base}/embeddings` with
`{"model", "input": [texts], "encoding_format": "float"}` and the answer
`{"data": [{"index", "embedding": [floats]}], "model"}`. The key comes from the environment
(`AIDEMEMO_EMBEDDING_API_KEY`), never from a flag; without one no Authorization header is
sent (a local server). Stdlib HTTP; vectors are re-normalised here, whatever the server does.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence

from aidememo.domain.errors import ErrorCode, fail
from aidememo.domain.semantic import Fingerprint, pack

KEY_ENV = "AIDEMEMO_EMBEDDING_API_KEY"
PROVIDER = "openai-compatible"
TIMEOUT_S = 30.0
BATCH = 64


class OpenAICompatible:
    """`aidememo.ports.Embedder` over HTTP."""

    def __init__(self, base_url: str, model: str, dimensions: int) -> None:
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self.fingerprint = Fingerprint(PROVIDER, model, base_url.rstrip("/"), dimensions)

    @classmethod
    def connect(cls, base_url: str, model: str) -> OpenAICompatible:
        """A provider whose dimensions are learnt from one probe request."""
        if not base_url.startswith(("http://", "https://")) or not model:
            raise fail(ErrorCode.INVALID_COMMAND, "use openai:http(s)://HOST/v1#MODEL")
        probe = cls(base_url, model, 0)
        dims = len(probe._request(["dimension probe"])[0])
        return cls(base_url, model, dims)

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        """One packed unit vector per text; `semantic_unavailable` when the endpoint fails or
        answers vectors of another size."""
        out: list[bytes] = []
        for start in range(0, len(texts), BATCH):
            for vector in self._request(list(texts[start : start + BATCH])):
                if self.fingerprint.dimensions and len(vector) != self.fingerprint.dimensions:
                    raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, "embedding size changed")
                out.append(pack(vector))
        return out

    def _request(self, texts: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self._model, "input": texts, "encoding_format": "float"})
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(KEY_ENV)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self._url, body.encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                data = json.loads(answer.read())
            items = sorted(data["data"], key=lambda item: int(item["index"]))
            vectors = [[float(v) for v in item["embedding"]] for item in items]
        except (OSError, ValueError, KeyError, TypeError, urllib.error.URLError) as exc:
            raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, f"embedding endpoint failed: {exc}") from exc
        if len(vectors) != len(texts):
            raise fail(ErrorCode.SEMANTIC_UNAVAILABLE, "embedding endpoint answered too few")
        return vectors
