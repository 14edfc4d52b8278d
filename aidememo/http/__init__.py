"""The HTTP contract without a framework: `HttpApp.dispatch(Request) -> Response`.

The origin's ASGI adapter and the edge Worker both translate their runtime's request into a
`Request` and run the one request pipeline (`pipeline`) over the one route table (`routes`);
no framework type crosses this line.
"""
