"""The HTTP contract without a framework: `HttpApp.dispatch(Request) -> Response`.

The origin's ASGI adapter and the edge's Durable Object both translate their runtime's
request into a `Request` and send back the `Response`; no framework type crosses this line.
"""
