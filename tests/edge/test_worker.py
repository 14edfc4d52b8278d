"""The Worker's own behaviour: transport, limits, token cache, admin guard, routing."""

from __future__ import annotations

from pathlib import Path

from aidememo.domain.limits import MAX_REQUEST_BODY_BYTES
from aidememo.domain.model import Role
from tests.edge.conftest import Edge, make_edge

P = "/v1/projects/p1"


def _session(n: int) -> dict[str, object]:
    return {"command_id": f"c{n}", "payload": {"session_id": f"s{n}", "topic": "t"}}


def test_ready3_http15_health_reports_edge_mode_and_code_schema(edge: Edge) -> None:
    from aidememo.stores.sqlite.schema import SCHEMA_VERSION

    status, headers, body = edge.get("/health", None)
    assert (status, body) == (
        200,
        {"status": "ok", "mode": "edge", "schema_version": SCHEMA_VERSION, "state": "ok"},
    )
    assert headers["content-type"] == "application/json"
    status, _, doc = edge.get("/openapi.json", None)
    assert status == 200 and doc["openapi"].startswith("3.1")


def test_ready3_the_edge_worker_is_ready_while_it_runs(edge: Edge) -> None:
    status, headers, body = edge.get("/ready", None)
    assert (status, body) == (200, {"ready": True, "mode": "edge", "state": "ok"})
    assert "retry-after" not in headers


def test_edge2_plain_http_v1_is_426_before_any_other_check(edge: Edge) -> None:
    # No token, unknown route, wrong method: the transport is refused first.
    for method, path in (("GET", P + "/identity"), ("PUT", "/v1/nowhere"), ("GET", "/v1")):
        status, _, raw = edge.runtime.fetch(method, "http://edge.test" + path)
        assert status == 426, (method, path, raw)
        assert b'"insecure_transport"' in raw
    # Outside /v1 plain HTTP is served (health checks of load balancers).
    assert edge.runtime.fetch("GET", "http://edge.test/health")[0] == 200


def test_edge2_allow_insecure_http_var_admits_plain_http(tmp_path: Path) -> None:
    for e in make_edge(tmp_path, vars={"ALLOW_INSECURE_HTTP": "1"}):
        e.bootstrap("t1", "p1", "a1")
        status, _, _ = e.runtime.fetch(
            "GET",
            f"http://edge.test{P}/identity",
            {"authorization": f"Bearer {e.token('t1', 'a1')}"},
        )
        assert status == 200
    for e in make_edge(tmp_path / "off", vars={"ALLOW_INSECURE_HTTP": "0"}):
        assert e.runtime.fetch("GET", f"http://edge.test{P}/identity")[0] == 426


def test_rate1_rate_limit_429_with_retry_after_the_period(tmp_path: Path) -> None:
    for e in make_edge(tmp_path, rate_limit=3):
        e.bootstrap("t1", "p1", "a1")
        e.bootstrap("t1", "p1", "a2")
        a1, a2 = e.token("t1", "a1"), e.token("t1", "a2")
        assert [e.get(P + "/identity", a1)[0] for _ in range(3)] == [200, 200, 200]
        status, headers, body = e.get(P + "/identity", a1)
        assert status == 429 and body["error"]["code"] == "rate_limited"
        assert headers["retry-after"] == "60"
        assert e.get(P + "/identity", a2)[0] == 200  # the limit is per token digest
        e.clock.advance(60_000)  # the next fixed window
        assert e.get(P + "/identity", a1)[0] == 200


def test_rate1_rate2_edge_double_counts_600_per_60_s_like_the_binding(edge: Edge) -> None:
    """The default runtime's limiter is wrangler.toml's `RATE_LIMITER` (600 per 60 s): the
    601st request of a token in a window is 429; the next window starts over."""
    from tests.edge.runtime.ratelimit import configured

    assert configured() == (600, 60)
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    statuses = [edge.get(P + "/identity", token)[0] for _ in range(600)]
    assert statuses == [200] * 600
    status, _, body = edge.get(P + "/identity", token)
    assert (status, body["error"]["code"]) == (429, "rate_limited")
    edge.clock.advance(60_000)
    assert edge.get(P + "/identity", token)[0] == 200


def test_rate1_rate_limit_comes_after_authentication(tmp_path: Path) -> None:
    for e in make_edge(tmp_path, rate_limit=1):
        for _ in range(3):  # unknown tokens are 401, never 429, and spend no budget
            assert e.get(P + "/identity", "unknown-token")[0] == 401


def test_edge3_revoked_token_works_at_most_30_s_in_an_isolate_that_cached_it(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    assert edge.get(P + "/identity", token)[0] == 200  # cached in this isolate
    other = edge.runtime.isolate()  # another isolate revokes it
    digest = __import__("hashlib").sha256(token.encode()).hexdigest()
    status, _, _ = edge.runtime.admin(
        "POST", "/v1/admin/tokens/revoke", json={"token_sha256": digest}, isolate=other
    )
    assert status == 200
    edge.clock.advance(29_999)
    assert edge.get(P + "/identity", token)[0] == 200  # the documented window
    edge.clock.advance(1)
    status, _, body = edge.get(P + "/identity", token)
    assert (status, body["error"]["code"]) == (401, "authentication_failed")
    # The isolate that revoked it refused it at once.
    status, _, _ = edge.runtime.fetch(
        "GET", f"https://edge.test{P}/identity", {"authorization": f"Bearer {token}"}, isolate=other
    )
    assert status == 401


def test_auth5_suspension_and_role_change_apply_on_the_next_request(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    assert edge.post(P + "/sessions", token, _session(1))[0] == 200
    admin = edge.runtime.admin
    body = {"tenant_id": "t1", "project_id": "p1", "actor_id": "a1"}
    assert admin("POST", "/v1/admin/members", json={**body, "role": Role.READER.value})[0] == 200
    status, _, answer = edge.post(P + "/sessions", token, _session(2))
    assert (status, answer["error"]["code"]) == (403, "project_unauthorized")
    assert edge.get(P + "/identity", token)[0] == 200
    assert admin("POST", "/v1/admin/members", json={**body, "status": "suspended"})[0] == 200
    assert edge.get(P + "/identity", token)[0] == 403


def test_adm1_admin_routes_401_without_token_and_403_with_a_member_token(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    path = "/v1/admin/tenants/t1/export"
    status, _, body = edge.get(path, None)
    assert (status, body["error"]["code"]) == (401, "authentication_failed")
    status, _, body = edge.get(path, "not-a-known-token")
    assert (status, body["error"]["code"]) == (401, "authentication_failed")
    status, _, body = edge.get(path, edge.token("t1", "a1"))
    assert (status, body["error"]["code"]) == (403, "admin_required")
    assert edge.get(path, edge.runtime.admin_token)[0] == 200


def test_adm1_admin_routes_disabled_without_the_secret(tmp_path: Path) -> None:
    for e in make_edge(tmp_path, admin_token=None):
        for bearer in ("admin-token-for-tests", None):
            status, _, body = e.get("/v1/admin/tenants/t1/export", bearer)
            assert (status, body["error"]["code"]) == (403, "admin_disabled")
            assert "ADMIN_TOKEN_SHA256" in body["error"]["message"]


def test_http1_oversized_body_refused_from_content_length_unread(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    headers = {
        "authorization": f"Bearer {edge.token('t1', 'a1')}",
        "content-type": "application/json",
        "content-length": str(MAX_REQUEST_BODY_BYTES + 1),
    }
    request_log: list[bool] = []
    status, _, raw = edge.runtime.fetch(
        "POST", f"https://edge.test{P}/sessions", headers, b"{}", body_used=request_log
    )
    assert status == 413 and b"payload_too_large" in raw
    assert request_log == [False]


def test_http1_edge_refuses_an_unauthenticated_post_without_reading_its_body(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    for auth in ({}, {"authorization": "Bearer not-a-known-token"}):
        headers = {**auth, "content-type": "application/json", "content-length": "2"}
        request_log: list[bool] = []
        status, _, raw = edge.runtime.fetch(
            "POST", f"https://edge.test{P}/sessions", headers, b"{}", body_used=request_log
        )
        assert status == 401 and b"authentication_failed" in raw
        assert request_log == [False]  # stage one refused it from the headers alone


def test_http1_bodiless_get_is_answered_without_reading_a_body(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    headers = {"authorization": f"Bearer {edge.token('t1', 'a1')}"}
    request_log: list[bool] = []
    status, _, _ = edge.runtime.fetch(
        "GET", f"https://edge.test{P}/identity", headers, b"", body_used=request_log
    )
    assert status == 200 and request_log == [False]
    # A GET that announces a body has it counted against the limit, as at the origin.
    big = b"x" * (MAX_REQUEST_BODY_BYTES + 1)
    status, _, raw = edge.runtime.fetch(
        "GET", f"https://edge.test{P}/identity", {**headers, "transfer-encoding": "chunked"}, big
    )
    assert status == 413 and b"payload_too_large" in raw


def test_edge4_commands_route_by_body_project_and_identity_comes_from_the_token(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    edge.bootstrap("t1", "p2", "a2")
    token = edge.token("t1", "a1")
    command = {
        "command_id": "raw1",
        "project_id": "p1",
        "expected_revision": None,
        "operation": "resource.put",
        "resource": {"kind": "custom.note", "id": "n1"},
        "change": "upsert",
        "payload": {"x": 1},
    }
    status, _, receipt = edge.post("/v1/commands", token, command)
    assert status == 200 and receipt["actor_id"] == "a1" and receipt["tenant_id"] == "t1"
    status, _, body = edge.post("/v1/commands", token, {**command, "project_id": "p2"})
    assert (status, body["error"]["code"]) == (403, "project_unauthorized")
    # Client headers cannot choose the tenant or actor: the object never sees them.
    status, _, receipt = edge.client.request(
        "POST",
        "/v1/commands",
        token=token,
        json={**command, "command_id": "raw2", "resource": {"kind": "custom.note", "id": "n2"}},
        headers={"x-tenant-id": "t2", "x-actor-id": "a2"},
    )
    assert status == 200 and (receipt["tenant_id"], receipt["actor_id"]) == ("t1", "a1")
    projects = edge.runtime.namespaces["PROJECTS"]
    assert ("t1/p1", "handle") in projects.calls
    # A malformed body is refused at the Worker with the handler's error, no object called.
    before = len(projects.calls)
    status, _, body = edge.client.request(
        "POST", "/v1/commands", token=token, body=b"{", headers={"content-type": "application/json"}
    )
    assert status == 400 and len(projects.calls) == before


def test_edge5_half_done_bootstrap_is_completed_by_a_retry(edge: Edge) -> None:
    projects = edge.runtime.namespaces["PROJECTS"]
    tokens = edge.runtime.namespaces["TOKENS"]
    projects.fail_next("sync_member")
    status, body = edge.bootstrap("t1", "p1", "a1")
    assert (status, body["error"]["code"]) == (503, "storage_failure")
    # Registry and directory are written; the project object is not: the token
    # authenticates, but the project refuses a non-member.
    token = edge.tokens.get("t1/a1")
    assert token is None
    tokens.fail_next("bind")
    status, body = edge.bootstrap("t1", "p1", "a1")  # fails one step earlier this time
    assert status == 503
    status, body = edge.bootstrap("t1", "p1", "a1")
    assert status == 200 and body["role"] == "writer"
    token = edge.token("t1", "a1")
    assert edge.get(P + "/identity", token)[0] == 200
    assert edge.post(P + "/sessions", token, _session(1))[0] == 200


def test_edge5_half_done_bootstrap_leaves_the_token_refused_until_completed(edge: Edge) -> None:
    import hashlib

    token = "half-done-token"
    digest = hashlib.sha256(token.encode()).hexdigest()
    edge.runtime.namespaces["PROJECTS"].fail_next("sync_member")
    body = {"tenant_id": "t1", "project_id": "p1", "actor_id": "a1", "token_sha256": digest}
    assert edge.runtime.admin("POST", "/v1/admin/bootstrap", json=body)[0] == 503
    status, _, answer = edge.get(P + "/identity", token)
    assert (status, answer["error"]["code"]) == (403, "project_unauthorized")
    assert edge.runtime.admin("POST", "/v1/admin/bootstrap", json=body)[0] == 200
    assert edge.get(P + "/identity", token)[0] == 200


def test_boot1_bootstrap_conflicts_change_nothing(edge: Edge) -> None:
    assert edge.bootstrap("t1", "p1", "a1", project_epoch="e1")[0] == 200
    status, body = edge.bootstrap("t1", "p1", "a9", project_epoch="e2")
    assert (status, body["error"]["code"]) == (403, "identity_mismatch")
    # A token bound in another tenant cannot be bound again (checked in the directory).
    import hashlib

    token = edge.token("t1", "a1")
    body2 = {
        "tenant_id": "t2",
        "project_id": "p1",
        "actor_id": "a1",
        "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
    }
    status, _, answer = edge.runtime.admin("POST", "/v1/admin/bootstrap", json=body2)
    assert (status, answer["error"]["code"]) == (403, "identity_mismatch")
    assert "t2" not in edge.runtime.namespaces["TENANTS"].names()


def test_rec1_edge1_tenant_isolation_across_objects(edge: Edge) -> None:
    edge.bootstrap("ta", "p1", "a1")
    edge.bootstrap("tb", "p1", "a1")
    ta, tb = edge.token("ta", "a1"), edge.token("tb", "a1")
    assert edge.post(P + "/sessions", ta, _session(1))[0] == 200
    status, _, body = edge.get(P + "/resources/session/s1", ta)
    assert status == 200 and "'ta'" in repr(body), body
    # Same project id, same actor id, other tenant: another object, no data.
    status, _, body = edge.get(P + "/resources/session/s1", tb)
    assert status == 404, body
    projects = edge.runtime.namespaces["PROJECTS"]
    assert {"ta/p1", "tb/p1"} <= set(projects.names())
    # Each object holds one tenant only.
    for name in ("ta/p1", "tb/p1"):
        conn = projects.storages[name]._conn
        tenants = {row[0] for row in conn.execute("SELECT tenant_id FROM tenants")}
        assert tenants == {name.split("/")[0]}
    status, _, body = edge.get("/v1/admin/tenants/tb/export", edge.runtime.admin_token)
    assert status == 200 and b'"tenant_id":"ta"' not in body


def test_edge1_token_directory_is_sharded_by_digest_prefix(edge: Edge) -> None:
    import hashlib

    for n in range(6):
        edge.bootstrap("t1", "p1", f"a{n}")
    shards = edge.runtime.namespaces["TOKENS"].names()
    expected = {
        "tokens-" + hashlib.sha256(edge.token("t1", f"a{n}").encode()).hexdigest()[:2]
        for n in range(6)
    }
    assert set(shards) == expected
    assert all(len(name) == len("tokens-00") for name in shards)


def test_edge1_objects_wake_with_their_schema_and_stray_names_write_nothing(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    assert edge.post(P + "/sessions", token, _session(1))[0] == 200
    for ns in edge.runtime.namespaces.values():
        ns.evict()  # every object is dropped; the next call wakes a new instance
    assert edge.get(P + "/resources/session/s1", token)[0] == 200
    status, _, body = edge.get("/v1/projects/nope/identity", token)
    assert (status, body["error"]["code"]) == (403, "project_unauthorized")
    conn = edge.runtime.namespaces["PROJECTS"].storages["t1/nope"]._conn
    tables = conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'").fetchall()
    assert tables == []


def test_edge1_invalid_project_id_refused_before_any_object(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    status, _, body = edge.get("/v1/projects/bad%20id/identity", edge.token("t1", "a1"))
    assert status == 400 and body["error"]["code"] == "invalid_identifier"
    assert all(name.startswith("t1/p1") for name in edge.runtime.namespaces["PROJECTS"].names())


def test_edge5_half_done_member_change_and_revocation_are_completed_by_a_retry(edge: Edge) -> None:
    import hashlib

    edge.bootstrap("t1", "p1", "a1")
    token = edge.token("t1", "a1")
    admin = edge.runtime.admin
    body = {"tenant_id": "t1", "project_id": "p1", "actor_id": "a1", "status": "suspended"}
    edge.runtime.namespaces["PROJECTS"].fail_next("sync_member")
    assert admin("POST", "/v1/admin/members", json=body)[0] == 503
    assert edge.get(P + "/identity", token)[0] == 200  # the project object has not heard yet
    assert admin("POST", "/v1/admin/members", json=body)[0] == 200
    assert edge.get(P + "/identity", token)[0] == 403
    digest = {"token_sha256": hashlib.sha256(token.encode()).hexdigest()}
    edge.runtime.namespaces["TENANTS"].fail_next("revoke")
    assert admin("POST", "/v1/admin/tokens/revoke", json=digest)[0] == 503
    assert admin("POST", "/v1/admin/tokens/revoke", json=digest)[0] == 200
    status, _, answer = admin("POST", "/v1/admin/tokens/revoke", json={"token_sha256": "0" * 64})
    assert (status, answer["error"]["code"]) == (404, "resource_not_found")


def test_edge5_half_done_tenant_deletion_is_completed_by_a_retry(edge: Edge) -> None:
    edge.bootstrap("t1", "p1", "a1")
    edge.bootstrap("t1", "p2", "a2")
    assert edge.post(P + "/sessions", edge.token("t1", "a1"), _session(1))[0] == 200
    edge.runtime.namespaces["TENANTS"].fail_next("delete_tenant")
    path = "/v1/admin/tenants/t1?confirm=t1"
    assert edge.runtime.admin("DELETE", path)[0] == 503
    status, _, answer = edge.runtime.admin("DELETE", path)
    assert status == 200
    # The retry removes what the first attempt left: the registry's rows; the project
    # objects were emptied by the first attempt, so it counts none of their rows.
    removed = answer["removed"]
    assert (removed["tenants"], removed["projects"], removed["actors"]) == (1, 2, 2)
    assert (removed["token_bindings"], removed["changes"], removed["resources"]) == (2, 0, 0)
    assert edge.runtime.admin("DELETE", path)[0] == 404


def test_edge7_every_edge_handler_key_has_its_handler_in_each_mode(edge: Edge) -> None:
    from aidememo.http.routes import ROUTES
    from aidememo.http.types import Auth, EdgeHandler
    from worker.artifacts import BINDING_STEPS
    from worker.entry import OWN_HANDLERS, POSTGRES_HANDLERS
    from worker.grants import GRANT_STEPS

    declared = [r.edge_handler for r in ROUTES if r.edge_handler is not None]
    assert sorted(declared) == sorted(EdgeHandler)  # each key names one route's handler
    assert set(OWN_HANDLERS) == set(EdgeHandler)
    assert set(POSTGRES_HANDLERS) == {r.edge_handler for r in ROUTES if r.auth is Auth.ADMIN}
    assert set(BINDING_STEPS) == set(GRANT_STEPS) <= set(OWN_HANDLERS)
