"""The import guide keeps a line to statements that work, and steps aside when the model insists."""

from __future__ import annotations

from fimble.completion.context.imports import ImportChoices
from fimble.completion.engine.guide import ImportGuide, import_guide

CHOICES = ImportChoices({".bccache": ("Bucket",), "jinja2.bccache": ("Bucket",), "typing": ("Any", "cast")})


def _ranked(*pieces: tuple[str, float]) -> list[tuple[int, str, float]]:
    return [(i, piece, logit) for i, (piece, logit) in enumerate(pieces)]


def test_viable_lines_are_prefixes_of_a_statement() -> None:
    g = ImportGuide(CHOICES)
    for line in ("", "fr", "from ", "from .bcc", "from .bccache import ", "from .bccache import Buck"):
        assert g.viable(line), line
    assert g.viable("from typing import Any, ca")
    assert not g.viable("from .bccache import CodeGenerator")
    assert not g.viable("from .environment")
    assert not g.viable("from typing import Any, Any")  # a name once
    assert not g.viable("import os")


def test_finished_lines_bind_only_names_the_module_gives() -> None:
    g = ImportGuide(CHOICES)
    assert g.finished("from jinja2.bccache import Bucket")
    assert g.finished("from typing import cast, Any")
    assert not g.finished("from typing import Any, ")
    assert not g.finished("from jinja2.bccache import Buck")


def test_the_best_workable_token_within_the_margin_is_taken() -> None:
    g = ImportGuide(CHOICES, "from .bccache import ")
    # The model prefers a name bccache does not define; Bucket is close behind.
    assert g.pick("", _ranked(("CodeGenerator", 3.0), ("Bucket", 1.5))) == 1
    assert g.pick("Bucket", _ranked(("Gen", 2.0), ("\n", 1.0))) == 1  # ends only when whole
    assert not g.released


def test_the_model_s_own_choice_stands_when_it_fits() -> None:
    g = ImportGuide(CHOICES, "from ")
    assert g.pick("", _ranked((".bccache", 9.0), ("jinja2", 8.0))) == 0


def test_whether_the_line_is_an_import_at_all_is_the_model_s_call() -> None:
    g = ImportGuide(CHOICES)
    assert g.pick("", _ranked(("try", 10.0), ("from", 9.5))) == 0  # ``try:`` among the imports
    assert g.released
    assert g.pick("try", _ranked((":", 5.0), ("from", 4.9))) == 0  # the model's own choice from now on
    g = ImportGuide(CHOICES)
    assert g.pick("", _ranked(("from", 10.0), ("try", 9.5))) == 0 and not g.released


def test_a_model_that_insists_on_another_import_is_let_through_for_good() -> None:
    g = ImportGuide(CHOICES, "from ")
    # numpy is 6 nats ahead of any module that has a missing name: not one of ours.
    assert g.pick("", _ranked(("numpy", 10.0), (".bcc", 4.0))) == 0
    assert g.released


def test_nothing_workable_among_the_best_lets_the_model_go() -> None:
    g = ImportGuide(CHOICES, "from ")
    assert g.pick("", _ranked(("numpy", 5.0), ("pandas", 4.0))) == 0
    assert g.released


def test_an_end_token_is_workable_only_after_a_whole_statement() -> None:
    g = ImportGuide(CHOICES, "from typing import ")
    assert g.pick("An", _ranked(("", 5.0), ("y", 4.0))) == 1
    assert g.pick("Any", _ranked(("", 5.0), ("y", 4.0))) == 0


def test_past_the_line_the_guide_has_nothing_to_say() -> None:
    g = ImportGuide(CHOICES)
    assert g.pick("from typing import Any\n", _ranked(("x", 1.0), ("from", 0.5))) == 0


def test_a_guide_only_for_a_line_that_can_start_an_import() -> None:
    assert import_guide(CHOICES, "    from .bcc") is not None
    assert import_guide(CHOICES, "") is not None
    assert import_guide(CHOICES, "x = ") is None
    assert import_guide(None, "from ") is None
    assert import_guide(ImportChoices(), "from ") is None


LIST = "from agents import (\n    Agent,\n    "


def test_inside_an_open_import_list_a_line_is_names_the_module_gives() -> None:
    choices = ImportChoices({"agents": ("Runner", "RunConfig"), "agents.run": ("Runner",)})
    g = import_guide(choices, LIST)
    assert g is not None and g.within == "agents" and g.typed == ""
    assert g.viable("Run") and g.viable("Runner,") and g.viable("Runner, RunC")
    assert not g.viable("Agent") and not g.viable("Runner, Runner")
    assert g.finished("Runner,") and g.finished("Runner") and not g.finished("Run")
    # The model's ``Agent`` (already imported) gives way to the missing name, comma included.
    assert g.pick("", _ranked(("Agent", 3.0), ("Runner", 2.0))) == 1
    assert g.pick("Runner", _ranked(("\n", 3.0), (",", 2.5))) == 0  # no comma needed at the end


def test_a_closed_list_or_a_list_of_another_module_is_not_guided_as_one() -> None:
    choices = ImportChoices({"agents": ("Runner",)})
    closed = "from agents import (\n    Agent,\n)\n"
    assert import_guide(choices, closed + "from ").within is None
    assert import_guide(choices, "from other import (\n    x,\n    ") is None


ALIASED = ImportChoices({".exceptions": ("SSLError", "ProxyError")}, plain=("pkg.mod",))


def test_a_name_may_be_bound_under_an_alias_of_the_model_s_choosing() -> None:
    """requests' ``from .exceptions import SSLError as RequestsSSLError``: the name is held to the
    choices, the alias (any identifier) is the model's."""
    g = ImportGuide(ALIASED)
    head = "from .exceptions import "
    for rest in (
        "SSLError ",
        "SSLError a",
        "SSLError as",
        "SSLError as ",
        "SSLError as Requests",
        "ProxyError, SSLError as E",
    ):
        assert g.viable(head + rest), rest
    assert g.viable("import pkg.mod as m") and g.viable("import pkg.mod a")
    assert g.finished(head + "SSLError as RequestsSSLError") and g.finished(
        head + "SSLError as E, ProxyError"
    )
    assert g.finished("import pkg.mod as mod")
    assert not g.finished(head + "SSLError as") and not g.finished("import pkg.mod as")
    assert not g.viable(head + "Timeout as T")  # the name is still one the module gives
    assert not g.viable(head + "SSLError as E, SSLError")  # once
    assert not g.viable(head + "SSLError is") and not g.viable("import pkg.mod is")


def test_the_model_s_alias_stands_where_the_guide_ended_the_line_before() -> None:
    g = ImportGuide(ALIASED, "from .exceptions import ")
    assert g.pick("SSLError", _ranked((" as", 3.0), ("\n", 2.0))) == 0
    assert g.pick("SSLError as", _ranked((" RequestsSSLError", 3.0), (" SSLError", 2.9))) == 0
    assert g.pick("SSLError as RequestsSSLError", _ranked(("\n", 3.0), (",", 2.0))) == 0
    assert not g.released
    assert g.pick("SSLError as RequestsSSLError\n", _ranked(("x", 1.0))) == 0  # past the line


def test_a_choice_with_its_alias_holds_the_line_to_that_alias() -> None:
    g = ImportGuide(ImportChoices({".exceptions": ("SSLError as RequestsSSLError", "ProxyError")}))
    head = "from .exceptions import "
    assert (
        g.viable(head + "SSLError")
        and g.viable(head + "SSLError as Req")
        and g.viable(head + "ProxyError as P")
    )
    assert not g.viable(head + "SSLError as E") and not g.finished(head + "SSLError")
    assert g.finished(head + "SSLError as RequestsSSLError, ProxyError")
    g = ImportGuide(g.choices, head)
    assert g.pick("SSLError", _ranked(("\n", 3.0), (",", 2.5), (" as", 1.0))) == 2
    assert g.pick("SSLError as", _ranked((" SSL", 3.0), (" Requests", 1.0))) == 1


def test_a_line_may_open_a_parenthesised_list_whose_names_are_below() -> None:
    """requests' tests blank ``from requests.compat import (`` above its names: the model's ``(``
    fits, where the guide used to hold the line to one of the names (``builtin_str``)."""
    choices = ImportChoices({"requests.compat": ("builtin_str", "urlparse")})
    g = ImportGuide(choices, "from requests.compat import", list_below=True)
    assert g.viable("from requests.compat import (") and g.finished("from requests.compat import (")
    assert g.pick("", _ranked((" (", 5.0), ("builtin_str", 4.0))) == 0
    assert g.pick(" (", _ranked(("\n", 6.0), ("builtin", 1.0))) == 0  # ends there: names below
    assert g.viable("from requests.compat import (builtin_str, url")
    assert g.finished("from requests.compat import (builtin_str, urlparse)")
    assert g.finished("from requests.compat import (urlparse,)")
    assert g.finished("from requests.compat import (urlparse,")  # the rest on the lines below
    assert not g.viable("from requests.compat import (Session")
    assert not g.finished("from requests.compat import (builtin_str")
    assert not g.finished("from requests.compat import ()")


def test_a_list_opens_only_where_the_lines_below_are_its_names() -> None:
    """requests' adapters.py, ``from .auth import _basic_auth_str`` on one line: the model's ``(``
    would open a list nothing closes, so the guide holds it to a name."""
    choices = ImportChoices({".auth": ("_basic_auth_str",)})
    alone = import_guide(choices, "from .auth import", "\nfrom .compat import urlparse\n")
    assert alone is not None and not alone.list_below
    assert not alone.viable("from .auth import (")
    assert alone.pick("", _ranked((" (", 5.0), (" _basic", 4.0))) == 1
    for below in ("\n    _basic_auth_str,\n)\n", "\n\tSSLError as E,\n)"):
        guide = import_guide(choices, "from .auth import", below)
        assert guide is not None and guide.list_below, below
