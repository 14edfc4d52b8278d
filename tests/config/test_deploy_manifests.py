"""Config tier: the deployment files validate and configure only what the origin reads.

`deploy/kubernetes/` validates against the Kubernetes 1.31 schemas bundled with
`kubernetes-validate` (strict: no unknown fields), the kustomization lists every manifest, and
every environment variable the manifests and `deploy/compose.yaml` give a container is one the
command it runs reads (its flags' `AIDEMEMO_*` fallbacks, `AIDEMEMO_HOME`, and for a command
with `--artifact-backend` the variables of boto3's standard credential chain it documents).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from aidememo.cli.main import build_parser
from aidememo.cli.stores import HOME_ENV
from origin.limits import TIMEOUT_ENVIRON

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
COMPOSE = REPO / "deploy" / "compose.yaml"
KUBERNETES_VERSION = "1.31.0"
# boto3's standard provider chain (OBJ-2): what a command with S3 bodies reads for credentials.
BOTO3_CREDENTIALS = frozenset(
    {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
     "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"}
)  # fmt: skip


def _manifests() -> list[Path]:
    return sorted(p for p in KUBE.glob("*.yaml") if p.name != "kustomization.yaml")


def _documents() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in _manifests():
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path, doc


def _reads(argv: list[str]) -> set[str]:
    """The environment variables the command `argv` reads."""
    ns: argparse.Namespace = build_parser().parse_args(argv)
    names = {opt.env for opt in ns._opts} | {HOME_ENV}
    if argv[0] == "serve":
        names |= set(TIMEOUT_ENVIRON.values())
    if "AIDEMEMO_ARTIFACT_BACKEND" in names:
        names |= BOTO3_CREDENTIALS
    return names


def _command(args: list[str]) -> list[str]:
    """The subcommand an image's arguments run (the image's CMD is `serve`)."""
    if not args:
        return ["serve"]
    return args[:2] if args[0] == "admin" else args[:1]


def test_deploy6_manifests_validate_for_kubernetes_1_31() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    kinds = []
    for path, doc in _documents():
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        kinds.append((doc["kind"], doc["metadata"]["name"], path.name))
    names = {(kind, name) for kind, name, _ in kinds}
    for expected in (
        ("Deployment", "aidememo-api"),
        ("Service", "aidememo-api"),
        ("PodDisruptionBudget", "aidememo-api"),
        ("NetworkPolicy", "aidememo-api"),
        ("Job", "aidememo-migrate"),
        ("ConfigMap", "aidememo-config"),
        ("ConfigMap", "aidememo-s3"),
        ("CronJob", "aidememo-gc"),
        ("NetworkPolicy", "aidememo-gc"),
        ("Deployment", "aidememo-indexer"),
        ("NetworkPolicy", "aidememo-indexer"),
    ):
        assert expected in names, expected


def test_deploy6_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in _manifests()]


def test_deploy6_api_pods_probe_health_and_ready_and_run_unprivileged() -> None:
    pod = _deployment("aidememo-api")["spec"]["template"]["spec"]
    (api,) = pod["containers"]
    assert api["livenessProbe"]["httpGet"]["path"] == "/health"
    assert api["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert api["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert "limits" in api["resources"] and "requests" in api["resources"]


def _deployment(name: str) -> dict[str, Any]:
    (found,) = [
        d for _, d in _documents() if d["kind"] == "Deployment" and d["metadata"]["name"] == name
    ]
    return found


def _config_maps() -> dict[str, dict[str, str]]:
    return {
        d["metadata"]["name"]: d.get("data", {})
        for _, d in _documents()
        if d["kind"] == "ConfigMap"
    }


def _pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    for _, doc in _documents():
        spec = doc.get("spec", {})
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            yield doc["metadata"]["name"], spec["template"]["spec"]


def test_deploy6_manifests_set_only_variables_the_origin_reads() -> None:
    maps = _config_maps()
    checked = 0
    for name, pod in _pod_specs():
        for container in pod["containers"]:
            reads = _reads(_command(container.get("args", [])))
            names = {e["name"] for e in container.get("env", [])}
            for source in container.get("envFrom", []):
                names |= set(maps[source["configMapRef"]["name"]])
            unknown = names - reads
            assert not unknown, f"{name}/{container['name']} sets {sorted(unknown)}"
            checked += len(names)
    assert checked > 0


def test_deploy6_compose_sets_only_variables_the_origin_reads() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    checked = 0
    for name, service in compose["services"].items():
        image = str(service.get("image", ""))
        if "aidememo-origin" not in image:
            continue
        command = service.get("command", [])
        shell = re.search(r"\baidememo (admin \w+|\w+)", " ".join(command))
        if service.get("entrypoint", [None])[0] == "/bin/sh" and shell is not None:
            argv = shell.group(1).split()  # `sh -c '... aidememo admin gc ...'`
        else:
            argv = _command(command)
        names = set(service.get("environment", {}))
        unknown = names - _reads(argv)
        assert not unknown, f"{name} sets {sorted(unknown)}"
        checked += len(names)
    assert checked > 0


def test_deploy6_obj2_gc_cronjob_and_api_pods_keep_bodies_in_s3() -> None:
    (cronjob,) = [d for _, d in _documents() if d["kind"] == "CronJob"]
    (gc,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert gc["args"] == ["admin", "gc"]
    (api,) = _deployment("aidememo-api")["spec"]["template"]["spec"]["containers"]
    for container in (gc, api):
        refs = {source["configMapRef"]["name"] for source in container["envFrom"]}
        assert "aidememo-s3" in refs
        secrets = {
            e["name"]: e["valueFrom"]["secretKeyRef"]["name"]
            for e in container["env"]
            if "valueFrom" in e
        }
        assert secrets["AWS_ACCESS_KEY_ID"] == secrets["AWS_SECRET_ACCESS_KEY"] == "aidememo-s3"
    assert _config_maps()["aidememo-s3"]["AIDEMEMO_ARTIFACT_BACKEND"] == "s3"
    policies = {d["metadata"]["name"]: d for _, d in _documents() if d["kind"] == "NetworkPolicy"}
    for name in ("aidememo-api", "aidememo-gc"):
        ports = {p["port"] for rule in policies[name]["spec"]["egress"] for p in rule["ports"]}
        assert {5432, 443, 53} <= ports, name


def test_deploy1_compose_origins_and_gc_keep_bodies_in_seaweedfs() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    for name in ("origin-a", "origin-b", "gc"):
        env = services[name]["environment"]
        assert env["AIDEMEMO_ARTIFACT_BACKEND"] == "s3", name
        assert env["AIDEMEMO_S3_ENDPOINT"] == "http://seaweedfs:8333", name
        assert env["AWS_SHARED_CREDENTIALS_FILE"].startswith("/run/secrets/"), name
    assert "AIDEMEMO_S3_PUBLIC_ENDPOINT" in services["origin-a"]["environment"]
    assert "aidememo admin gc" in " ".join(services["gc"]["command"])
    assert services["gc"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )


def test_sem8_indexer_deployment_beside_the_api_pods() -> None:
    """`aidememo-indexer` runs `aidememo indexer` on the API's database with the bundled model;
    the API pods run no indexer of their own, and the indexer reaches PostgreSQL and DNS only."""
    pod = _deployment("aidememo-indexer")["spec"]["template"]["spec"]
    (indexer,) = pod["containers"]
    assert indexer["args"] == ["indexer"]
    env = {e["name"]: e for e in indexer["env"]}
    assert env["AIDEMEMO_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["name"] == "aidememo-database"
    assert env["AIDEMEMO_EMBEDDING"]["value"] == "bundled"
    assert indexer["resources"]["limits"]["cpu"] == "1"
    assert indexer["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert _config_maps()["aidememo-config"]["AIDEMEMO_INDEXER"] == "off"
    policies = {d["metadata"]["name"]: d for _, d in _documents() if d["kind"] == "NetworkPolicy"}
    policy = policies["aidememo-indexer"]["spec"]
    assert "ingress" not in policy and "Ingress" in policy["policyTypes"]
    ports = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
    assert ports == {5432, 53}


def test_sem8_compose_runs_one_indexer_for_both_origins() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    indexer = services["indexer"]
    assert indexer["command"] == ["indexer"]
    assert indexer["environment"]["AIDEMEMO_EMBEDDING"] == "bundled"
    assert indexer["environment"]["AIDEMEMO_DATABASE_URL"].endswith("@postgres:5432/aidememo")
    assert indexer["healthcheck"] == {"disable": True}  # it serves no HTTP
    assert indexer["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for name in ("origin-a", "origin-b"):
        assert services[name]["environment"]["AIDEMEMO_INDEXER"] == "off", name


def test_sem8_image_installs_the_semantic_extra_pinned() -> None:
    """The image's requirements pin every package of the `semantic` extra (the model's own
    version as pyproject pins it), so the bundled model is inside the image."""
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["semantic"]
    pinned: dict[str, str] = {}
    for name in ("requirements.txt", "requirements-nodeps.txt"):
        for line in (REPO / "deploy" / name).read_text().splitlines():
            if line and not line.startswith("#"):
                package, _, version = line.partition("==")
                pinned[package.lower().replace("_", "-")] = version
    for requirement in extra:
        package = re.split(r"[<>=\[]", requirement)[0].lower().replace("_", "-")
        assert package in pinned, package
        if "==" in requirement:
            assert pinned[package] == requirement.partition("==")[2], package
