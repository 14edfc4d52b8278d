"""The origin profile: the core's HTTP dispatch served over ASGI by uvicorn (CPython only).

`origin.asgi` translates ASGI to `aidememo.http.types.Request`/`Response`; `origin.server`
runs uvicorn with access logs and a graceful SIGTERM. Nothing here is imported by the core.
"""
