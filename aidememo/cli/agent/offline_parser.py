"""The offline agents' part of the command tree: `replica` and `outbox` (SPEC.md REPLICA-*,
OUTBOX-*), and `--no-queue` on the commands that queue (`session new`, `fact add`,
`handoff send`)."""

from __future__ import annotations

import argparse

from aidememo.cli.agent.flags import agent, flag, positional
from aidememo.cli.options import Command, int_in

QUEUE_HELP = "exit 3 when the server cannot be reached instead of queueing in the outbox"


def add_no_queue(cmd: Command) -> None:
    flag(cmd, "--no-queue", switch=True, help=QUEUE_HELP)


def add_offline_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replica = sub.add_parser(
        "replica", help="an exact-read copy of the project for reading offline"
    ).add_subparsers(dest="replica_command", metavar="ACTION", required=True)
    pull = agent(replica, "pull", "bring the replica up to the server's head", "replica",
                  "cmd_pull")  # fmt: skip
    flag(pull, "--watch", switch=True, help="then keep it current from the live feed (Ctrl-C ends)")
    status = agent(replica, "status", "the replica's pin and cursor (no network)",
                    "replica", "cmd_status")  # fmt: skip
    get = agent(replica, "get", "one cached resource (no network)", "replica", "cmd_get")
    positional(get, "kind", "session, fact, handoff, handoff_context or custom.*")
    positional(get, "resource_id", "its id")
    search = agent(replica, "search", "search the cached facts by words and meaning (no network)",
                    "replica", "cmd_search")  # fmt: skip
    positional(search, "query", "plain text")
    flag(search, "--mode", default="auto", choices=["lexical", "semantic", "hybrid", "auto"],
         help="auto: hybrid with the local model (semantic extra), else lexical")  # fmt: skip
    flag(search, "--source", help="only this source's facts")
    flag(search, "--limit", convert=int_in(1, 100), help="results")
    reset = agent(replica, "reset", "forget the replica and its pin", "replica",
                   "cmd_reset")  # fmt: skip
    flag(reset, "--force", switch=True, help="really forget it")
    for cmd in (pull, status, get, search, reset):
        flag(
            cmd, "--path", help="the replica file (default $AIDEMEMO_HOME/replicas/PROFILE.sqlite)"
        )

    outbox = sub.add_parser(
        "outbox", help="commands queued while the server could not be reached"
    ).add_subparsers(dest="outbox_command", metavar="ACTION", required=True)
    agent(outbox, "list", "the queued commands, in order (no network)", "queueing",
           "cmd_outbox_list")  # fmt: skip
    agent(outbox, "publish", "send the queued commands, in order, with their original ids",
           "queueing", "cmd_outbox_publish")  # fmt: skip
    drop = agent(outbox, "drop", "forget one queued command without sending it", "queueing",
                  "cmd_outbox_drop")  # fmt: skip
    positional(drop, "item", "its item number (outbox list)", type=int_in(1, 2**63 - 1))
