"""SUITE-1: every test name cites a rule, every cited rule is defined, every rule is cited.

A rule is defined where SPEC.md gives its id: a bold list item (`- **HO-3** ...`), a table
cell holding only the id (`| LEDGER-7 | stale revision |`), or a heading that starts with it
(`### SEC-1 ...`). Ids inside fenced code blocks are ignored; ranges such as `AUTH-3..5` are
references, not definitions.

A test name is the name pytest reports for a collected test function before any parameter id
in brackets: a `def test_...` (or `async def`) at module level or in a `Test...` class of a
`tests/**/test_*.py` module. Parameter ids and functions generated at import time do not
count, so each conformance check has its own function in `tests/conformance/test_checks.py`.

A name cites rules in one form: right after `test_`, one or more rule ids lower-cased without
their dash, each followed by `_` (`test_ho3_...`, `test_live3_vis1_...`). The first word after
`test_` that looks like an id (letters then digits) must be a defined rule, as must any later
leading word of a defined rule family (`test_ho3_ho9_...` fails); a defined rule spelled
another way (`..._AUTH_5`, `test_x_ho3_...`) fails too, so every citation has one spelling.
A name that cites no rule at all (`test_store_pragmas`) fails as well: a test that checks
behaviour no rule states either belongs under a broader rule or shows a rule SPEC.md lacks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "SPEC.md"
TESTS = ROOT / "tests"

RULE = r"[A-Z][A-Z0-9]*-\d+"
_BOLD = re.compile(rf"\*\*({RULE})\*\*")
_CELL = re.compile(rf"(?<=\|)[ \t]*({RULE})[ \t]*(?=\|)")
_HEADING = re.compile(rf"^#+[ \t]+({RULE})\b", re.M)
_MENTION = re.compile(r"\b([A-Z]{2,}-\d+)\b")
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_SLUG_SHAPE = re.compile(r"[a-z]+\d+")

# Words with digits SPEC.md uses that are not rule ids, and name words that look like an id
# right after `test_` but are not citations.
NOT_RULES = frozenset({"UTF-8", "UTF-16", "SHA-256"})
NOT_CITATIONS = frozenset({"int64", "utf8", "sha256"})


def spec_rules(text: str) -> set[str]:
    """The rule ids `text` (SPEC.md's Markdown) defines."""
    text = _FENCE.sub("", text)
    rules = set(_BOLD.findall(text)) | set(_HEADING.findall(text))
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            rules.update(_CELL.findall(line))
    return rules


def slug(rule: str) -> str:
    """`HO-3` -> `ho3`: the rule as a test name cites it."""
    return rule.replace("-", "").lower()


def _family(word: str) -> str:
    return word.rstrip("0123456789")


def collected_test_names(root: Path = TESTS) -> dict[str, list[str]]:
    """Every test name under `root`, with the modules (relative paths) that define it."""
    names: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if not (path.name.startswith("test_") or path.name.endswith("_test.py")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name in _collected(tree.body):
            names.setdefault(name, []).append(str(path.relative_to(root.parent)))
    return names


def _collected(body: Iterable[ast.stmt]) -> Iterable[str]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                yield node.name
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from _collected(node.body)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            # a definition under a module-level `if`, `try` or `with` is collected too
            for block in ("body", "orelse", "finalbody"):
                yield from _collected(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _collected(handler.body)


def citations(name: str, rules: set[str]) -> tuple[list[str], list[str]]:
    """The rules `name` cites, and what is wrong with its citations (empty when nothing is)."""
    by_slug = {slug(r): r for r in rules}
    families = {_family(s) for s in by_slug}
    words = name.removeprefix("test_").split("_")
    cited: list[str] = []
    problems: list[str] = []
    rest = 0
    for i, word in enumerate(words):
        if word in by_slug:
            cited.append(by_slug[word])
        elif (
            _SLUG_SHAPE.fullmatch(word)
            and word not in NOT_CITATIONS
            and (i == 0 or _family(word) in families)
        ):
            problems.append(f"{name}: cites {word!r}, which SPEC.md does not define")
        else:
            rest = i
            break
    else:
        rest = len(words)
    tail = words[rest:]
    for word in tail:
        if word in by_slug:
            problems.append(f"{name}: cites {by_slug[word]} after other words; put it first")
    for family, number in re.findall(r"(?:^|_)([A-Za-z]+)_(\d+)(?=_|$)", "_".join(tail)):
        rule = f"{family.upper()}-{number}"
        if rule in rules:
            problems.append(f"{name}: spells {rule} as {family}_{number}; use test_{slug(rule)}_")
    return cited, problems


def citing_nothing(names: dict[str, list[str]], rules: set[str]) -> list[str]:
    """`module: name` of each test name in `names` that cites no rule of `rules`."""
    return [
        f"{module}: {name}"
        for name, modules in sorted(names.items())
        if not citations(name, rules)[0]
        for module in modules
    ]


def test_suite1_spec_parser_reads_every_definition_form() -> None:
    text = "\n".join(
        [
            "- **HO-3** a bold item, citing HO-6 and AUTH-3..5 in passing",
            "| id | check | | id | check |",
            "|---|---|---|---|---|",
            "| LEDGER-7 | stale revision | | IDENT-10 | scope, see ERR-1 |",
            "### SEC-1 A heading rule",
            "```",
            "- **NOT-1** inside a code block",
            "```",
        ]
    )
    assert spec_rules(text) == {"HO-3", "LEDGER-7", "IDENT-10", "SEC-1"}


def test_suite1_spec_test_names_include_conditional_and_class_definitions(tmp_path: Path) -> None:
    module = tmp_path / "tests" / "test_sample.py"
    module.parent.mkdir()
    module.write_text(
        "def test_top(): pass\n"
        "def helper(): pass\n"
        "class TestGroup:\n"
        "    def test_method(self): pass\n"
        "class Helper:\n"
        "    def test_ignored(self): pass\n"
        "if True:\n"
        "    async def test_conditional(): pass\n",
        encoding="utf-8",
    )
    (module.parent / "support.py").write_text("def test_not_a_test_module(): pass\n")
    names = collected_test_names(module.parent)
    assert set(names) == {"test_top", "test_method", "test_conditional"}


def test_suite1_spec_citation_forms() -> None:
    rules = {"HO-3", "HO-6", "LIVE-3", "VIS-1", "AUTH-5", "ID-1", "CJ-3"}
    assert citations("test_ho3_lease_expires", rules) == (["HO-3"], [])
    assert citations("test_live3_vis1_hidden", rules) == (["LIVE-3", "VIS-1"], [])
    assert citations("test_cj3_int64_bounds", rules) == (["CJ-3"], [])
    assert citations("test_store_pragmas", rules) == ([], [])
    assert citations("test_http_c1_session", rules) == ([], [])
    for bad in (
        "test_ho9_typo",
        "test_ho3_ho9_typo",
        "test_hoo3_typo",
        "test_suspend_AUTH_5",
        "test_kept_id_1",
        "test_lease_ho6_late",
    ):
        assert citations(bad, rules)[1], bad
    names = {"test_ho3_lease": ["tests/a.py"], "test_store_pragmas": ["tests/b.py", "tests/c.py"]}
    assert citing_nothing(names, rules) == [
        "tests/b.py: test_store_pragmas",
        "tests/c.py: test_store_pragmas",
    ]


def test_suite1_spec_parser_finds_every_rule_spec_mentions() -> None:
    """A rule SPEC.md refers to but the parser does not find is a definition form it misses."""
    text = SPEC.read_text(encoding="utf-8")
    rules = spec_rules(text)
    assert len(rules) >= 111 and {"ID-1", "HO-3", "LEDGER-15", "IDENT-10"} <= rules
    mentioned = set(_MENTION.findall(_FENCE.sub("", text))) - NOT_RULES
    missed = sorted(mentioned - rules)
    assert not missed, (
        f"SPEC.md mentions {missed} but defines them in no form spec_rules reads (a bold list "
        "item, a table cell holding only the id, a heading); a word that is no rule id goes in "
        "NOT_RULES"
    )


def test_suite1_spec_test_names_cite_only_defined_rules_in_one_form() -> None:
    rules = spec_rules(SPEC.read_text(encoding="utf-8"))
    problems = [p for name in collected_test_names() for p in citations(name, rules)[1]]
    assert not problems, "\n".join(problems)


def test_suite1_spec_every_rule_is_cited_by_a_test_name() -> None:
    rules = spec_rules(SPEC.read_text(encoding="utf-8"))
    cited = {rule for name in collected_test_names() for rule in citations(name, rules)[0]}
    uncited = sorted(rules - cited, key=lambda r: (_family(r), int(r.rsplit("-", 1)[1])))
    assert not uncited, f"no test name cites {uncited}; name a test that checks it test_<rule>_"


def test_suite1_every_test_name_cites_a_rule() -> None:
    rules = spec_rules(SPEC.read_text(encoding="utf-8"))
    missing = citing_nothing(collected_test_names(), rules)
    assert not missing, (
        "these test names cite no rule; name each test_<rule>_... after the SPEC.md rule it "
        "checks, or add the rule it shows is missing (SUITE-1):\n" + "\n".join(missing)
    )
