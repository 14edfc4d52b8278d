#!/usr/bin/env python3
"""Write the generated files of the secret detector's false-positive corpus (SPEC.md SEC-5).

`tests/data/secrets_corpus/README.md` says where every file of the corpus comes from. This
script writes the generated ones, deterministically (a fixed random seed), so rerunning it
changes nothing unless the script changes:

- `hashes.txt`: every commit hash of this repository's history up to the commit named by
  `--rev` (full and 7-character forms), then SHA-256 and SHA-1 digests of counter strings;
- `ids.txt`: version-4 UUIDs and ULIDs, bare and in the sentences agents write about them;
- `urls.txt`: URLs without credentials (schemes, hosts, ports, paths, queries, fragments);
- `base64.txt`: base64 and base64url of 3-48 random bytes, bare and labelled.

`commit_messages.txt` is `git log --format='%H%n%B'` of the same range (`--commits`).

    scripts/gen_secrets_corpus.py [--rev REV] [--commits]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import random
import subprocess
import uuid
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "secrets_corpus"
SEED = 20261201
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def hashes(rev: str) -> list[str]:
    commits = _git("log", "--format=%H", rev).split()
    lines = [*commits, *(c[:7] for c in commits)]
    lines += [hashlib.sha256(f"row {i}".encode()).hexdigest() for i in range(60)]
    lines += [f"sha1 {hashlib.sha1(f'blob {i}'.encode()).hexdigest()}" for i in range(60)]
    return lines


def _ulid(rnd: random.Random) -> str:
    value = (rnd.randrange(1_600_000_000_000, 1_900_000_000_000) << 80) | rnd.getrandbits(80)
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def ids(rnd: random.Random) -> list[str]:
    lines: list[str] = []
    templates = (
        "{}",
        "session_id={}",
        "session_id: {}",
        "fact {} recorded by codex-p1",
        "handoff {} accepted, claim {}",
        '{{"session_id": "{}", "fact_id": "{}"}}',
        "command_id {} replayed",
        "see /v1/projects/p1/resources/fact/{}",
    )
    for i in range(120):
        make = (lambda: str(uuid.UUID(int=rnd.getrandbits(128), version=4))) if i % 2 else None
        a = make() if make else _ulid(rnd)
        b = make() if make else _ulid(rnd)
        lines.append(templates[i % len(templates)].format(a, b))
    return lines


def urls(rnd: random.Random) -> list[str]:
    schemes = ("https", "http", "postgresql", "postgres", "redis", "mysql", "mongodb", "amqp")
    hosts = ("localhost", "127.0.0.1", "db.internal", "example.com", "api.example.org:8443",
             "[::1]:5432", "cache:6379", "github.com")  # fmt: skip
    paths = ("", "/", "/aidememo", "/v1/projects/p1/facts", "/org/repo/pull/42",
             "/docs/guide.html#tokens", "/0", "/search?q=password+reset&limit=20",
             "/path/with%20space/and~tilde", "/files/report-2026-11-30.pdf")  # fmt: skip
    users = ("", "", "", "app@", "readonly@", "demo:password@", "svc:REDACTED@", "ci:****@")
    lines = []
    for _ in range(120):
        scheme = rnd.choice(schemes)
        lines.append(f"{scheme}://{rnd.choice(users)}{rnd.choice(hosts)}{rnd.choice(paths)}")
    return lines


def small_base64(rnd: random.Random) -> list[str]:
    lines = []
    labels = ("{}", "etag: {}", "checksum {}", "digest={}", "nonce: {}", "data:image/png;base64,{}")
    for i in range(160):
        raw = rnd.randbytes(rnd.randrange(3, 49))
        text = base64.urlsafe_b64encode(raw) if i % 2 else base64.b64encode(raw)
        lines.append(labels[i % len(labels)].format(text.decode()))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the last commit of the history read")
    parser.add_argument("--commits", action="store_true", help="also write commit_messages.txt")
    args = parser.parse_args()
    rnd = random.Random(SEED)
    files = {
        "hashes.txt": hashes(args.rev),
        "ids.txt": ids(rnd),
        "urls.txt": urls(rnd),
        "base64.txt": small_base64(rnd),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        (OUT / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if args.commits:
        (OUT / "commit_messages.txt").write_text(_git("log", "--format=%H%n%B", args.rev))


if __name__ == "__main__":
    main()
