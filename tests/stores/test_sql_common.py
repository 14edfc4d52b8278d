"""The statements both SQL stores share are one text, rendered per dialect (STORE-8)."""

from __future__ import annotations

from aidememo.stores.postgres import sql as pg
from aidememo.stores.sql_common.statements import SharedSql
from aidememo.stores.sqlite import sql as lite


def _shared(dialect: SharedSql) -> dict[str, str]:
    texts = {
        name: getattr(dialect, name)
        for name, value in vars(SharedSql).items()
        if isinstance(value, str) and name.isupper()
    }
    texts.update({f"MAILBOX{key}": text for key, text in dialect.MAILBOX.items()})
    return texts


def test_store8_shared_statements_differ_only_in_placeholders() -> None:
    templates = _shared(SharedSql("?"))
    assert len(templates) > 30
    assert _shared(lite.DIALECT) == templates
    for name, text in _shared(pg.DIALECT).items():
        template = templates[name]
        assert "%" not in template, name  # the `%s` style would read it as a placeholder
        assert text == template.replace("?", "%s"), name
        assert text.count("%s") == template.count("?") > 0, name
