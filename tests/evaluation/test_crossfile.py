"""Cross-file marking: a name counts when it resolves through the file's imports, not when any file
happens to define something of that name."""

from __future__ import annotations

from fimble.evaluation.crossfile import Resolver, Use, classify, code_uses, not_named_above


def _names(line: str, column: int = 0) -> list[str]:
    return [u.name for u in code_uses(line, column)]


def test_strings_comments_keyword_arguments_and_targets_are_not_uses() -> None:
    assert _names("    return jsonify(result=a + b)") == ["jsonify"]
    assert _names('    x = fetch("get", url)  # uses helper') == ["fetch", "url"]
    assert _names('    \'"10": "foo",\'') == []
    assert _names("    if a == other:") == ["other"]


def test_the_cursor_column_limits_the_names_to_the_masked_rest() -> None:
    line = "    prep = session.prepare_request(req)"
    assert _names(line, line.index("prepare")) == ["prepare_request", "req"]
    # the cursor may sit inside a string: its words are still not code
    line = '    msg = "use the " + helper("error codes")'
    assert _names(line, line.index("the")) == ["helper"]


def test_names_being_defined_are_skipped_but_annotations_count() -> None:
    assert _names("    def __init__(self, app: Flask) -> None:") == ["app", "Flask"]
    assert _names("class CustomFlask(flask.Flask):") == ["flask", "Flask"]


def test_attributes_carry_their_qualifier() -> None:
    assert code_uses("x = requests.cookies.Jar()") == [
        Use("requests"),
        Use("cookies", "requests"),
        Use("Jar", "cookies"),
    ]


def _resolver() -> Resolver:
    return Resolver(
        bound={"Flask": ("src/app.py",), "current_app": ("src/globals.py",)},
        own=frozenset({"local_helper", "should_set_cookie"}),
        reachable={"route", "Flask", "group", "get_namespace"}.__contains__,
        external=frozenset({"click"}),
    )


def test_bare_names_count_only_when_imported_from_the_workspace() -> None:
    r = _resolver()
    assert classify(code_uses("def __init__(self, app: Flask) -> None:"), r) == ["Flask"]
    assert classify(code_uses("if current_app:"), r) == ["current_app"]
    # ``route`` is defined in a reachable file, but a bare name must be bound by an import
    assert classify(code_uses("route(app)"), r) == []


def test_attributes_count_when_reachable_and_not_defined_here_nor_on_an_external_module() -> None:
    r = _resolver()
    assert classify(code_uses('@app.route("/")'), r) == ["route"]
    assert classify(code_uses("config.get_namespace('FOO_')"), r) == ["get_namespace"]
    assert classify(code_uses("self.should_set_cookie(app, session)"), r) == []
    assert classify(code_uses("@click.group(cls=AppGroup)"), r) == []


def test_methods_of_builtin_types_are_not_counted_on_attributes() -> None:
    r = Resolver(bound={}, own=frozenset(), reachable={"get", "pop", "route"}.__contains__)
    assert classify(code_uses('rv = client.get("/")'), r) == []
    assert classify(code_uses("w = recwarn.pop()"), r) == []
    assert classify(code_uses('@bp.route("/")'), r) == ["route"]


def test_names_not_spelled_out_above_the_cursor_are_the_unseen_ones() -> None:
    above = "from .app import Flask\napp = Flask(__name__)\napp.config_class  # no\nx = app."
    assert not_named_above(["Flask", "config", "route"], above) == ["config", "route"]
    assert not_named_above([], above) == []


def test_typescript_private_fields_are_code_and_its_comments_are_not() -> None:
    def names(line: str) -> list[str]:
        return [u.name for u in code_uses(line, 0, "typescript")]

    # ``#`` starts a private field in TypeScript, not a comment: what follows it is still code
    assert names("  return this.#count + area(w, w); // uses helper") == ["count", "area"]
    assert names("  const b = build(/* old: legacy() */ shape);") == ["build", "shape"]
    assert names("  const s = `total: ${area}`;") == []
    # the language's own names are not another file's (``log`` is an attribute: see below)
    assert names("  console.log(new Promise(resolve));") == ["log", "resolve"]


def test_typescript_methods_of_builtin_types_are_not_counted() -> None:
    reachable = {"push", "then", "grow", "log"}.__contains__
    r = Resolver(bound={}, own=frozenset(), reachable=reachable, language="tsx")
    assert classify(code_uses("items.push(box.grow());", 0, "tsx"), r) == ["grow"]
    assert classify(code_uses("load().then(done); console.log(x);", 0, "tsx"), r) == []
