"""The agent commands' part of the command tree: `auth`, `session`, `fact`, `search`, `get`,
`members`, `handoff`, `changes`, `watch`, `artifact` (SPEC.md CLI-2..CLI-6, ART-*), and
`replica` and `outbox` (`aidememo.cli.agent.offline_parser`, REPLICA, OUTBOX).

Only `--profile` (`AIDEMEMO_PROFILE`) and `--json` (`AIDEMEMO_JSON`) may come from the
environment; every other flag is given on the command line (`flag`). The handlers speak to a
server through `aidememo.client` (its standard-library `Client`) and are imported only when
one of them runs (`aidememo.cli.options.lazy`); a missing optional dependency (`watch` needs
websockets) is a usage error (exit 2) naming the extra to install.
"""

from __future__ import annotations

import argparse

from aidememo.cli.agent.flags import agent, flag, positional
from aidememo.cli.options import Command, int_in, lazy

SEQ_MAX = 2**63 - 1


def add_no_queue(cmd: Command) -> None:
    from aidememo.cli.agent.offline_parser import add_no_queue as add

    add(cmd)


def add_offline_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from aidememo.cli.agent.offline_parser import add_offline_commands as add

    add(sub)


def add_agent_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the agent commands to the top-level subcommands."""
    seq = int_in(0, SEQ_MAX)
    auth = sub.add_parser("auth", help="named profiles: who the agent commands act as")
    actions = auth.add_subparsers(dest="auth_command", metavar="ACTION", required=True)
    login = Command(
        actions.add_parser("login", help="check a token and save it as a named profile"),
        lazy("aidememo.cli.agent.auth", "cmd_login"),
    )
    login.add("--profile", env="AIDEMEMO_PROFILE", required=True, help="profile name")
    flag(login, "--url", required=True, help="the server (http://127.0.0.1:3030, https://...)")
    flag(login, "--project-id", required=True, help="project id")
    flag(login, "--token-file", required=True, help="file holding the member's token")
    flag(
        login,
        "--store-token",
        switch=True,
        help="copy the token into $AIDEMEMO_HOME/tokens/ (0600)",
    )
    login.add("--json", switch=True, help="print JSON for scripts")
    listing = Command(
        actions.add_parser("list", help="the saved profiles (never their tokens)"),
        lazy("aidememo.cli.agent.auth", "cmd_list"),
    )
    listing.add("--json", switch=True, help="print JSON for scripts")
    logout = Command(
        actions.add_parser("logout", help="forget a profile (and its stored token copy)"),
        lazy("aidememo.cli.agent.auth", "cmd_logout"),
    )
    logout.add("--profile", env="AIDEMEMO_PROFILE", required=True, help="profile name")

    session = sub.add_parser("session", help="sessions").add_subparsers(
        dest="session_command", metavar="ACTION", required=True
    )
    new = agent(session, "new", "create a session", "commands", "cmd_session_new")
    positional(new, "topic", "what the session is about")
    flag(new, "--id", help="session id (default: a new ULID)")
    flag(new, "--source", help="source id (default: the server's)")
    add_no_queue(new)
    sessions = agent(session, "list", "the project's sessions, newest first", "commands",
                      "cmd_session_list")  # fmt: skip
    flag(sessions, "--source", help="only this source's sessions")
    flag(sessions, "--before-seq", convert=int_in(1, SEQ_MAX), help="page on (exclusive)")
    flag(sessions, "--limit", convert=int_in(1, 100), help="sessions per page")

    fact = sub.add_parser("fact", help="facts").add_subparsers(
        dest="fact_command", metavar="ACTION", required=True
    )
    add = agent(fact, "add", "add a fact to a session", "commands", "cmd_fact_add")
    positional(add, "content", "the fact (default, or '-': read from stdin)", nargs="?")
    flag(add, "--session", required=True, help="session id")
    flag(add, "--id", help="fact id (default: a new ULID)")
    add_no_queue(add)
    facts = agent(fact, "list", "a session's facts in commit order", "commands", "cmd_fact_list")
    flag(facts, "--session", required=True, help="session id")
    flag(facts, "--after-seq", convert=seq, help="page on (exclusive)")
    flag(facts, "--limit", convert=int_in(1, 10_000), help="facts per page")

    search = agent(sub, "search", "search facts", "commands", "cmd_search")
    positional(search, "query", "plain text")
    flag(search, "--at-least-seq", convert=seq, help="refuse an index older than this sequence")
    flag(search, "--source", help="only this source's facts")
    flag(search, "--limit", convert=int_in(1, 100), help="results")
    flag(
        search,
        "--mode",
        choices=["lexical", "semantic", "hybrid", "auto"],
        help="by words, by meaning, both, or hybrid where the index is built (default auto)",
    )
    flag(search, "--explain", switch=True, help="print each list's score and rank")

    get = agent(sub, "get", "one resource's current body", "commands", "cmd_get")
    positional(get, "kind", "session, fact, handoff, handoff_context or custom.*")
    positional(get, "resource_id", "its id")

    agent(sub, "members", "the project's members", "commands", "cmd_members")

    changes = agent(sub, "changes", "change entries after a sequence", "commands", "cmd_changes")
    flag(changes, "--after-seq", default=0, convert=seq, help="exclusive cursor")
    flag(changes, "--limit", convert=int_in(1, 10_000), help="entries")
    watch = agent(sub, "watch", "the live change feed: batches as they come (Ctrl-C ends)",
                   "commands", "cmd_watch")  # fmt: skip
    start = watch.parser.add_mutually_exclusive_group()
    start.add_argument(
        "--after-seq",
        type=seq,
        default=0,
        help="exclusive cursor to start from (default 0: the whole history)",
    )
    start.add_argument(
        "--since", type=int_in(1, SEQ_MAX), metavar="SEQ", help="start at this sequence (inclusive)"
    )
    start.add_argument("--from-now", action="store_true",
                       help="only what is committed from now on")  # fmt: skip

    _add_handoff(sub)
    add_offline_commands(sub)
    _add_artifact(sub)


def _add_artifact(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    artifact = sub.add_parser("artifact", help="file bodies under logical paths").add_subparsers(
        dest="artifact_command", metavar="ACTION", required=True
    )
    put = agent(artifact, "put", "publish a file at a path (replacing what is there)",
                 "artifact", "cmd_artifact_put")  # fmt: skip
    positional(put, "path", "logical path, e.g. sessions/<s>/artifacts/<name>")
    positional(put, "file", "the file, or '-' for stdin")
    flag(put, "--content-type", default="application/octet-stream", help="media type")
    get = agent(artifact, "get", "the bytes at a path", "artifact", "cmd_artifact_get")
    positional(get, "path", "logical path")
    flag(get, "--out", help="write to this new file (default, or `-`: stdout)")
    flag(get, "--revision", convert=int_in(1, SEQ_MAX), help="an older revision")
    resolve = agent(artifact, "resolve", "a path's current metadata", "artifact",
                     "cmd_artifact_resolve")  # fmt: skip
    positional(resolve, "path", "logical path")
    abort = agent(artifact, "abort", "abort a reservation", "artifact", "cmd_artifact_abort")
    positional(abort, "reservation_id", "reservation id")


def _add_handoff(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    handoff = sub.add_parser("handoff", help="hand work to another agent").add_subparsers(
        dest="handoff_command", metavar="ACTION", required=True
    )
    send = agent(handoff, "send", "hand a session's work to another writer", "handoff",
                  "cmd_send")  # fmt: skip
    flag(send, "--session", required=True, help="session id")
    flag(send, "--to", required=True, help="the receiving actor (see `members`)")
    flag(send, "--focus", help="what to do")
    flag(send, "--done-when", help="when it is done")
    flag(send, "--context", help="the id of a context created for this handoff")
    flag(send, "--id", help="handoff id (default: a new ULID)")
    add_no_queue(send)
    for box in ("inbox", "outbox"):
        cmd = agent(handoff, box, f"handoffs {'to' if box == 'inbox' else 'from'} this actor",
                     "handoff", f"cmd_{box}")  # fmt: skip
        flag(cmd, "--all", switch=True, help="include completed handoffs")
        flag(cmd, "--limit", convert=int_in(1, 100), help="handoffs")
    for name, help in (
        ("accept", "claim a handoff (a re-run after a lost answer recovers the same claim)"),
        ("heartbeat", "renew the claim's lease"),
        ("status", "a handoff's record and lease"),
    ):
        cmd = agent(handoff, name, help, "handoff", f"cmd_{name}")
        positional(cmd, "handoff_id", "handoff id")
    ret = agent(handoff, "return", "return a claimed handoff with a result fact of yours",
                 "handoff", "cmd_return")  # fmt: skip
    positional(ret, "handoff_id", "handoff id")
    flag(ret, "--result-fact", required=True, help="your fact in the handoff's session")
    flag(ret, "--result-artifact", help="a published artifact holding the result (HO-9)")
    flag(ret, "--outcome", default="succeeded", choices=["succeeded", "failed"],
            help="failed releases the claim for a new attempt")  # fmt: skip
