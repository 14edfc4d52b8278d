"""The runtime objects the Worker touches on every request, without the SDK's generic layers.

The SDK wraps every binding (`_BindingWrapper`): each call walks its arguments
(`python_to_rpc`: a deep copy replacing None, a type check of every nested value, `to_js`)
and its result (`python_from_rpc`: `to_py` and another deep copy); its `Request.headers`
builds an `http.client.HTTPMessage` and its `Response` checks and converts every argument.
For what the Worker does on every request that costs more than the work itself, so here:
- the rate limiter's JS binding is called directly with a JS object made once by `to_js`,
  and its answer is read as a JS object (`raw`, `js_object`, `field`);
- the request's headers are read in one conversion of the JS `Headers` (`request_headers`);
- a text answer is a JS `Response` made in one call (`text_response`);
- the SDK's `env` wrapper, which looks a binding up and wraps it on first use and remembers
  it, is made afresh for every request; `shared_env` keeps the isolate's first one (the
  runtime hands every request of an isolate the same `env`), so each binding is looked up
  and wrapped once per isolate, and `raw_binding` keeps the JS binding under it;
- the rate limiter's `{key}` object is made once per token digest (`limit_key`), and the
  project object's answer (`response_text`: a JSON line of status and headers, then the
  body) becomes a `Response` whose init object is made once per distinct status and
  headers (`framed_response`): answers repeat the same few.
Outside Pyodide (the CPython runtime double) each falls back to the SDK's own objects.
"""

from __future__ import annotations

import json
from typing import Any

try:  # Pyodide only
    from js import Object
    from js import Response as JsResponse
    from pyodide.ffi import JsProxy, to_js
except ImportError:  # CPython: the runtime double takes and returns Python values
    Object = None
    JsResponse = None
    JsProxy = None
    to_js = None


_SHARED_ENV: list[Any] = []  # [the JS env, the SDK wrapper kept for it]
_RAW: dict[str, Any] = {}  # binding name -> the JS binding, for the kept env
_LIMIT_KEYS: dict[str, Any] = {}  # digest hex -> the rate limiter's JS {key} object
_INITS: dict[str, Any] = {}  # an answer's head line -> its JS Response init object
_KEPT = 1024  # entries per cache; a full cache starts over


def shared_env(env: Any) -> Any:
    """The isolate's kept SDK `env` wrapper when `env` wraps the same JS env, else `env`
    (kept from now on)."""
    js_env = getattr(env, "_env", None)
    if JsProxy is None or not isinstance(js_env, JsProxy):
        return env
    if _SHARED_ENV and (_SHARED_ENV[0] is js_env or _SHARED_ENV[0] == js_env):
        return _SHARED_ENV[1]
    _SHARED_ENV[:] = [js_env, env]
    _RAW.clear()
    return env


def raw_binding(env: Any, name: str) -> Any:
    """`raw(getattr(env, name))`, looked up once per isolate under Pyodide."""
    if JsProxy is None:
        return getattr(env, name)
    found = _RAW.get(name)
    if found is None:
        found = _RAW[name] = raw(getattr(env, name))
    return found


def limit_key(digest_hex: str) -> Any:
    """The rate limiter's `{key: digest}` argument."""
    if to_js is None:
        return {"key": digest_hex}
    found = _LIMIT_KEYS.get(digest_hex)
    if found is None:
        if len(_LIMIT_KEYS) >= _KEPT:
            _LIMIT_KEYS.clear()
        found = _LIMIT_KEYS[digest_hex] = js_object({"key": digest_hex})
    return found


def framed_response(text: str) -> Any:
    """The runtime's `Response` of a project object's `response_text`."""
    if JsResponse is None:
        from durable_objects.rpc import response_parts

        return text_response(*response_parts(text))
    head, _, body = text.partition("\n")
    init = _INITS.get(head)
    if init is None:
        status, pairs = json.loads(head)
        init = to_js(
            {"status": int(status), "headers": {str(k): str(v) for k, v in pairs}},
            dict_converter=Object.fromEntries,
        )
        if len(_INITS) >= _KEPT:
            _INITS.clear()
        _INITS[head] = init
    return JsResponse.new(body, init)


def raw(binding: Any) -> Any:
    """The JS binding under the SDK's wrapper, or `binding` itself."""
    if JsProxy is None:
        return binding
    inner = getattr(binding, "_binding", None)
    return inner if isinstance(inner, JsProxy) else binding


def js_object(mapping: dict[str, Any]) -> Any:
    """A plain JS object of `mapping` (flat: str keys, scalar values), or `mapping`."""
    if to_js is None:
        return mapping
    return to_js(mapping, dict_converter=Object.fromEntries)


def field(answer: Any, name: str) -> Any:
    """`answer[name]` of a JS object or a mapping."""
    return answer[name] if isinstance(answer, dict) else getattr(answer, name)


def request_headers(request: Any) -> dict[str, str]:
    """The request's headers, names lower-case (a Fetch `Headers` lower-cases them)."""
    js_request = getattr(request, "js_object", None)
    if JsProxy is not None and isinstance(js_request, JsProxy):
        found: dict[str, str] = Object.fromEntries(js_request.headers).to_py()
        return found
    return {str(k).lower(): str(v) for k, v in request.headers.items()}


def text_response(text: str, status: int, headers: dict[str, str]) -> Any:
    """The runtime's `Response` of a text body."""
    if JsResponse is None:
        from workers import Response

        return Response(text, status=status, headers=headers)
    init = to_js({"status": status, "headers": headers}, dict_converter=Object.fromEntries)
    return JsResponse.new(text, init)
