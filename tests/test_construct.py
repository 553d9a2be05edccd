"""The rules of `yardstick.sdk.construct`, one test each, and an oracle check against
`sequence_base.construct` (the published package these rules come from; used here only as a reference to
compare outcomes with)."""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sequence_base.construct as oracle  # type: ignore[import-untyped]  # the oracle; a test dependency only
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yardstick.sdk import construct
from yardstick.sdk.construct import (
    CONFIG_KEY,
    FORMS,
    SET_KEY,
    build,
    config,
    expand,
    is_config,
    maker,
    read_config,
)
from yardstick.sdk.errors import ConstructError
from yardstick.sdk.specs import POLICY_FIELDS, Constructor

POLICY = {"hz": 15.0, "action_chunk_len": 8, "action_chunk_exec_len": None}


def refused(call: Callable[[], Any], *named: str) -> str:
    """Run `call`, expect a ConstructError whose message names each of `named`, and return the message."""
    with pytest.raises(ConstructError) as caught:
        call()
    message = str(caught.value)
    for thing in named:
        assert thing in message, f"{thing!r} not named in {message!r}"
    return message


# --- FORMS ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "group", "captured"),
    [
        ("{weights}", "part", None),
        ("{weights.vision_enc-2}", "part", "vision_enc-2"),
        ("{num_worlds}", "worlds", "num_worlds"),
        ("{policy.hz}", "field", "hz"),
        ("{policy._x9}", "field", "_x9"),
    ],
)
def test_forms_match_each_form_with_its_named_group(text: str, group: str, captured: str | None) -> None:
    match = FORMS.fullmatch(text)
    assert match is not None
    assert match.group(group) == captured


@pytest.mark.parametrize(
    "text",
    [
        "{weights.}",
        "{weights.9a}",
        "{policy.}",
        "{policy.a-b}",
        "{num_worlds }",
        "{worlds}",
        "weights",
        "{Weights}",
    ],
)
def test_forms_match_nothing_else(text: str) -> None:
    assert FORMS.fullmatch(text) is None


def test_forms_are_found_among_text() -> None:
    found = [m.group(0) for m in FORMS.finditer("a={num_worlds}, b={policy.hz}/{weights.x}")]
    assert found == ["{num_worlds}", "{policy.hz}", "{weights.x}"]
    assert CONFIG_KEY == "$config" and SET_KEY == "$set"


# --- config, is_config, read_config -----------------------------------------------------------------------


def test_config_is_a_path_and_its_overrides() -> None:
    assert config("conf/deploy.yml", lr=0.1, depth=3) == {
        "$config": "conf/deploy.yml",
        "$set": {"lr": 0.1, "depth": 3},
    }
    assert config("a.json") == {"$config": "a.json", "$set": {}}


@pytest.mark.parametrize("path", ["", None, 3])
def test_config_refuses_a_path_that_is_not_a_non_empty_string(path: Any) -> None:
    refused(lambda: config(path), repr(path), "relative to the folder")


def test_config_refuses_an_absolute_path() -> None:
    refused(lambda: config("/etc/deploy.yml"), "/etc/deploy.yml", "absolute")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"$config": "a.yml", "$set": {}}, True),
        ({"$config": "a.yml", "$set": {"x": 1}}, True),
        ({"$config": "a.yml"}, False),
        ({"$config": "a.yml", "$set": {}, "other": 1}, False),
        ({"$config": 3, "$set": {}}, False),
        (["$config", "$set"], False),
        ("a.yml", False),
    ],
)
def test_is_config(value: Any, expected: bool) -> None:
    assert is_config(value) is expected


def test_read_config_reads_json_and_yaml_whatever_the_suffix_case(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"x": [1, 2]}))
    (tmp_path / "b.YML").write_text("x: [1, 2]\ny: null\n")
    (tmp_path / "c.yaml").write_text("- 1\n- two\n")
    assert read_config(tmp_path / "a.json") == {"x": [1, 2]}
    assert read_config(str(tmp_path / "b.YML")) == {"x": [1, 2], "y": None}
    assert read_config(tmp_path / "c.yaml") == [1, "two"]


def test_read_config_refuses_another_kind_of_file(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("x = 1\n")
    refused(lambda: read_config(tmp_path / "a.toml"), "a.toml", ".json, .yml or .yaml")


def test_read_config_refuses_a_missing_file(tmp_path: Path) -> None:
    refused(lambda: read_config(tmp_path / "nope.yml"), "nope.yml", "no such config file")


def test_read_config_refuses_a_malformed_file(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    refused(lambda: read_config(tmp_path / "bad.json"), "bad.json", "JSON")


# --- expand: config values --------------------------------------------------------------------------------


def test_expand_reads_a_config_relative_to_base_dir_and_lays_set_over_it(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "deploy.yml").write_text("lr: 0.1\ndepth: 3\nckpt: '{weights}/model.pt'\n")
    value = {"cfg": config("conf/deploy.yml", depth=5, extra=True)}
    assert expand(value, base_dir=tmp_path, weights="/w") == {
        "cfg": {"lr": 0.1, "depth": 5, "ckpt": "/w/model.pt", "extra": True}
    }


def test_expand_reads_a_json_config(tmp_path: Path) -> None:
    (tmp_path / "env.json").write_text(json.dumps({"worlds": "{num_worlds}", "names": ["a", "b"]}))
    assert expand(config("env.json"), base_dir=str(tmp_path), worlds=4) == {"worlds": 4, "names": ["a", "b"]}


def test_expand_reads_a_config_named_in_a_config(tmp_path: Path) -> None:
    (tmp_path / "inner.json").write_text(json.dumps({"n": "{num_worlds}"}))
    (tmp_path / "outer.yaml").write_text(yaml.safe_dump({"inner": config("inner.json", m=1)}))
    assert expand(config("outer.yaml"), base_dir=tmp_path, worlds=2) == {"inner": {"n": 2, "m": 1}}


def test_expand_refuses_set_on_a_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "list.yml").write_text("- 1\n- 2\n")
    assert expand(config("list.yml"), base_dir=tmp_path) == [1, 2]
    refused(lambda: expand(config("list.yml", x=1), base_dir=tmp_path), "list.yml", "list", "not a mapping")


def test_expand_refuses_a_set_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    refused(lambda: expand({"$config": "a.json", "$set": [1]}, base_dir=tmp_path), "a.json", "$set", "list")


def test_expand_refuses_a_missing_config(tmp_path: Path) -> None:
    refused(lambda: expand([config("gone.json")], base_dir=tmp_path), "gone.json", "no such config file")


# --- expand: forms ----------------------------------------------------------------------------------------


def test_a_form_alone_keeps_its_type_and_among_text_becomes_text() -> None:
    assert expand("{num_worlds}", base_dir=".", worlds=8) == 8
    assert expand("n={num_worlds}", base_dir=".", worlds=8) == "n=8"
    assert expand("{policy.hz}", base_dir=".", policy=POLICY) == 15.0
    assert expand("{policy.action_chunk_exec_len}", base_dir=".", policy=POLICY) is None
    assert expand("exec={policy.action_chunk_exec_len}", base_dir=".", policy=POLICY) == "exec=None"
    assert expand("{num_worlds}x{num_worlds}", base_dir=".", worlds=3) == "3x3"


def test_expand_walks_nested_structures_and_leaves_other_values_alone() -> None:
    value = {"{num_worlds}": ("{num_worlds}", ["at {policy.hz} Hz", {"k": None}]), "flag": True, "x": 1.5}
    assert expand(value, base_dir=".", worlds=2, policy=POLICY) == {
        "{num_worlds}": [2, ["at 15.0 Hz", {"k": None}]],
        "flag": True,
        "x": 1.5,
    }


def test_num_worlds_is_refused_where_no_worlds_are_handed() -> None:
    refused(lambda: expand({"n": "{num_worlds}"}, base_dir="."), "{num_worlds}", "vectorized")
    refused(lambda: expand("n={num_worlds}", base_dir="."), "{num_worlds}")


def test_an_unknown_policy_field_is_refused_naming_the_fields() -> None:
    refused(lambda: expand("{policy.rate}", base_dir=".", policy=POLICY), "{policy.rate}", *POLICY_FIELDS)


def test_policy_fields_come_from_a_mapping_an_object_or_nothing() -> None:
    assert expand("{policy.action_chunk_len}", base_dir=".", policy=POLICY) == 8
    assert expand("{policy.action_chunk_len}", base_dir=".", policy={}) is None
    as_object = SimpleNamespace(hz=30.0, action_chunk_len=4)
    assert expand(["{policy.hz}", "{policy.action_chunk_len}"], base_dir=".", policy=as_object) == [30.0, 4]
    assert expand("{policy.hz}", base_dir=".", policy=None) is None


def test_weights_fill_as_one_directory() -> None:
    assert expand("{weights}", base_dir=".", weights=Path("/w/run1")) == "/w/run1"
    assert expand("--ckpt={weights}/last.pt", base_dir=".", weights="/w") == "--ckpt=/w/last.pt"


def test_weights_are_refused_when_there_are_none() -> None:
    refused(lambda: expand("{weights}", base_dir="."), "{weights}", "no weights")
    refused(lambda: expand("{weights.vision}", base_dir="."), "{weights.vision}", "no weights")


def test_a_part_of_weights_that_come_whole_is_refused() -> None:
    refused(lambda: expand("{weights.vision}", base_dir=".", weights="/w"), "{weights.vision}", "{weights}")


def test_weights_in_parts_are_named_by_part() -> None:
    parts: dict[str, str | Path] = {"vision": "/w/v", "lang-2": Path("/w/l")}
    assert expand(["{weights.vision}", "{weights.lang-2}"], base_dir=".", weights=parts) == ["/w/v", "/w/l"]
    refused(
        lambda: expand("{weights}", base_dir=".", weights=parts),
        "{weights}",
        "lang-2, vision",
        "{weights.<part>}",
    )
    refused(
        lambda: expand("{weights.audio}", base_dir=".", weights=parts),
        "{weights.audio}",
        "'audio'",
        "lang-2, vision",
    )


# --- build and maker --------------------------------------------------------------------------------------


class Env:
    """A constructor that records what it was handed."""

    def __init__(self, *args: Any, hz: float = 20.0, worlds: int = 1, **kwargs: Any) -> None:
        self.args = args
        self.hz = hz
        self.worlds = worlds
        self.kwargs = kwargs

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> Env:
        return cls("via create", *args, **kwargs)

    @staticmethod
    def plain(**kwargs: Any) -> dict[str, Any]:
        return {"plain": kwargs}

    not_a_factory = 3


def test_build_fills_args_and_kwargs_and_calls_the_class() -> None:
    kwargs = {"hz": "{policy.hz}", "tag": "w{num_worlds}"}
    constructor = Constructor(args=("{num_worlds}", ("x",)), kwargs=kwargs)
    made = build(Env, constructor, base_dir=".", worlds=4, policy=POLICY)
    assert isinstance(made, Env)
    assert made.args == (4, ["x"])
    assert made.hz == 15.0
    assert made.kwargs == {"tag": "w4"}


def test_a_policy_form_that_fills_none_leaves_its_keyword_out() -> None:
    kwargs = {"hz": "{policy.hz}", "chunk": "{policy.action_chunk_exec_len}"}
    made = build(Env, Constructor(kwargs=kwargs), base_dir=".", policy=None)
    assert made.hz == 20.0  # the constructor's own default
    assert made.kwargs == {}
    made = build(Env, Constructor(kwargs=kwargs), base_dir=".", policy=POLICY)
    assert made.hz == 15.0
    assert made.kwargs == {}  # action_chunk_exec_len is None in POLICY


def test_only_a_policy_form_alone_is_left_out_when_none() -> None:
    kwargs = {"label": "hz={policy.hz}", "given": None, "nested": ["{policy.hz}"]}
    made = build(Env, Constructor(kwargs=kwargs), base_dir=".")
    assert made.kwargs == {"label": "hz=None", "given": None, "nested": [None]}


def test_params_are_laid_over_the_kwargs_as_they_are() -> None:
    made = build(
        Env,
        Constructor(kwargs={"hz": "{policy.hz}", "tag": "a"}),
        base_dir=".",
        policy=POLICY,
        params={"hz": 50.0, "extra": "{num_worlds}"},
    )
    assert made.hz == 50.0
    assert made.kwargs == {"tag": "a", "extra": "{num_worlds}"}


def test_params_restore_a_keyword_that_was_left_out() -> None:
    made = build(Env, Constructor(kwargs={"hz": "{policy.hz}"}), base_dir=".", params={"hz": 5.0})
    assert made.hz == 5.0


def test_make_names_a_classmethod_or_a_staticmethod() -> None:
    made = build(Env, Constructor(args=("{num_worlds}",), make="create"), base_dir=".", worlds=2)
    assert isinstance(made, Env) and made.args == ("via create", 2)
    assert build(Env, Constructor(kwargs={"n": 1}, make="plain"), base_dir=".") == {"plain": {"n": 1}}


def test_make_names_a_module_function() -> None:
    made = build(
        Env,
        Constructor(kwargs={"b": "{num_worlds}", "a": 1}, make="collections:OrderedDict"),
        base_dir=".",
        worlds=3,
    )
    assert made == OrderedDict(b=3, a=1) and type(made) is OrderedDict


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = "yardstick_construct_factories"
    (tmp_path / f"{name}.py").write_text("def make_env(**kw):\n    return ('made', kw)\n\nSIZE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_make_imports_the_module_it_names(factories: str) -> None:
    made = build(
        Env, Constructor(kwargs={"n": "{num_worlds}"}, make=f"{factories}:make_env"), base_dir=".", worlds=6
    )
    assert made == ("made", {"n": 6})


def test_maker_without_make_is_the_class() -> None:
    assert maker(Env, None) is Env
    assert maker(Env, "") is Env


def test_maker_refuses_a_missing_or_uncallable_method() -> None:
    refused(lambda: maker(Env, "build_it"), "'build_it'", "Env", "classmethod")
    refused(lambda: maker(Env, "not_a_factory"), "not_a_factory", "int", "not callable")


def test_maker_refuses_a_module_that_cannot_be_imported() -> None:
    refused(lambda: maker(Env, "no_such_pkg_zz.mod:f"), "no_such_pkg_zz.mod", "cannot be imported")


@pytest.mark.parametrize("make", [":f", "a b:f", "..rel:f"])
def test_maker_refuses_what_is_not_a_module_name(make: str) -> None:
    refused(lambda: maker(Env, make), repr(make), "not a module name")


def test_maker_refuses_a_missing_or_uncallable_function(factories: str) -> None:
    refused(lambda: maker(Env, f"{factories}:nothing"), factories, "'nothing'", "no function")
    refused(lambda: maker(Env, f"{factories}:SIZE"), f"{factories}.SIZE", "not callable")


def test_the_package_exports_the_same_functions() -> None:
    import yardstick.sdk as sdk

    assert (sdk.build, sdk.config, sdk.expand) == (construct.build, construct.config, construct.expand)


# --- oracle -----------------------------------------------------------------------------------------------

FORM_TEXTS = [
    "{weights}",
    "{weights.a}",
    "{weights.b-1}",
    "{weights.zz}",
    "{num_worlds}",
    "{policy.hz}",
    "{policy.action_chunk_len}",
    "{policy.action_chunk_exec_len}",
    "{policy.speed}",
    "{weights.}",
    "{num_worlds",
    "{}",
]
CONFIG_FILES = {
    "map.json": json.dumps({"n": "{num_worlds}", "w": "{weights.a}", "keep": 1}),
    "list.yaml": "- '{policy.hz}'\n- plain\n",
    "nested.YML": yaml.safe_dump({"inner": config("map.json", keep="{policy.action_chunk_len}")}),
    "scalar.yml": "'{num_worlds}'\n",
    "plain.json": json.dumps({"keep": 1, "s": "x{}"}),
    "policy.yaml": "hz: '{policy.hz}'\nlabel: 'at {policy.hz} Hz'\n",
    "other.txt": "x",
}

texts = st.lists(
    st.one_of(st.text(alphabet="ab {}.=_-", max_size=5), st.sampled_from(FORM_TEXTS)), max_size=4
).map("".join)
configs = st.builds(
    lambda path, overrides: {"$config": path, "$set": overrides},
    st.sampled_from([*CONFIG_FILES, "missing.json"]),
    st.dictionaries(st.sampled_from(["n", "keep", "new"]), st.integers(0, 3) | texts, max_size=2),
)
leaves = st.none() | st.booleans() | st.integers(-5, 5) | texts | configs
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(alphabet="kv{}", max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
worlds_st = st.none() | st.integers(0, 64)
weights_st = (
    st.none()
    | st.sampled_from(["/w", "rel/dir"])
    | st.dictionaries(st.sampled_from(["a", "b-1", "c"]), st.sampled_from(["/w/a", "/w/b"]), max_size=3)
)
field_values = st.none() | st.integers(1, 16) | st.floats(1, 100, allow_nan=False)
policy_fields = st.dictionaries(st.sampled_from(POLICY_FIELDS), field_values, max_size=3)
policy_st = st.none() | policy_fields | policy_fields.map(lambda fields: SimpleNamespace(**fields))


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("configs")
    for name, text in CONFIG_FILES.items():
        (folder / name).write_text(text)
    return folder


def outcome(call: Callable[[], Any], *, refusals: tuple[type[Exception], ...]) -> tuple[str, str]:
    """("value", repr), ("refused", "") or ("raised", the exception's type). The value is compared by repr so
    that 1 and True, or 15 and 15.0, do not pass for each other."""
    try:
        return "value", repr(call())
    except refusals:
        return "refused", ""
    except Exception as exc:
        return "raised", type(exc).__name__


OURS = (ConstructError,)
# Where ours refuses with a ConstructError, the oracle lets an AttributeError or an ImportError through.
THEIRS = (oracle.ConstructError, AttributeError, ImportError)


ORACLE_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@ORACLE_SETTINGS
@given(value=values, worlds=worlds_st, weights=weights_st, policy=policy_st)
def test_expand_agrees_with_the_oracle(
    config_dir: Path, value: Any, worlds: int | None, weights: Any, policy: Any
) -> None:
    forms = {"worlds": worlds, "weights": weights, "policy": policy}
    ours = outcome(lambda: expand(value, base_dir=config_dir, **forms), refusals=OURS)
    theirs = outcome(
        lambda: oracle.expand(value, base_dir=str(config_dir), **forms), refusals=(oracle.ConstructError,)
    )
    assert ours == theirs


@ORACLE_SETTINGS
@given(
    args=st.lists(values, max_size=2),
    kwargs=st.dictionaries(
        st.sampled_from(["hz", "worlds", "label", "chunk"]), values | st.sampled_from(FORM_TEXTS), max_size=4
    ),
    make=st.sampled_from(
        [
            None,
            "create",
            "plain",
            "missing",
            "not_a_factory",
            "types:SimpleNamespace",
            "no_such_pkg_zz:f",
            "collections:no_such",
        ]
    ),
    params=st.none() | st.dictionaries(st.sampled_from(["hz", "extra"]), st.integers(0, 3), max_size=2),
    worlds=worlds_st,
    weights=weights_st,
    policy=policy_st,
)
def test_build_agrees_with_the_oracle(
    config_dir: Path,
    args: list[Any],
    kwargs: dict[str, Any],
    make: str | None,
    params: dict[str, Any] | None,
    worlds: int | None,
    weights: Any,
    policy: Any,
) -> None:
    constructor = Constructor(args=tuple(args), kwargs=kwargs, make=make)
    forms = {"worlds": worlds, "weights": weights, "policy": policy, "params": params}

    def seen(made: Any) -> Any:
        return vars(made) if isinstance(made, (Env, SimpleNamespace)) else made

    def theirs_build() -> Any:
        # The oracle hands back a non-callable make= and fails only when calling it; ours refuses it up front.
        if not callable(oracle.maker(Env, make)):
            raise oracle.ConstructError(make)
        return oracle.build(Env, constructor, base_dir=str(config_dir), **forms)

    ours = outcome(lambda: seen(build(Env, constructor, base_dir=config_dir, **forms)), refusals=OURS)
    theirs = outcome(lambda: seen(theirs_build()), refusals=THEIRS)
    assert ours == theirs
