"""Dagster config classes and resources derived from the domain's settings dataclasses (docs/settings.md "Asset
config and resource fields"): :func:`config_from` gives a ``Config`` or ``ConfigurableResource`` base a dataclass's
fields, defaults and descriptions (:func:`pipeline.core.fields.setting`), ``to_domain()`` builds the dataclass back,
and :func:`default_of` reads a function's keyword default. In the config a ``Path`` is a string, a tuple a list and a
dataclass (a field's, or a list's element) a nested config derived the same way; back in the dataclass, as they were."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

import pydantic
from dagster import Config

from pipeline.core.fields import description

T = TypeVar("T")


def _config_type(tp: Any, where: str) -> Any:
    """The type of a config field holding a value of the dataclass field type ``tp``."""
    if tp is Path:
        return str
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        return Union[tuple(_config_type(a, where) for a in args)]  # type: ignore[return-value]  # noqa: UP007
    if origin is tuple:
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"{where}: only tuple[X, ...] translates to a config list, not {tp}")
        return list[_config_type(args[0], where)]  # type: ignore[misc]
    if origin is list:
        return list[_config_type(args[0], where)] if args else list  # type: ignore[misc]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return nested(tp)
    return tp


@functools.cache
def nested(cls: type) -> Any:
    """The Dagster ``Config`` derived from the dataclass ``cls`` (one class per dataclass)."""
    base = config_from(cls)
    return type(
        f"{cls.__name__}Config",
        (base,),
        {"__doc__": cls.__doc__, "__module__": __name__, "model_config": {**base.model_config, "extra": "forbid"}},
    )


def with_sections(model: type[T], entries: Iterable[Any], what: str, optional: bool = False) -> bool:
    """Give the pydantic ``model``, in place, a config section per entry of ``entries`` registered now (plugins' too;
    one registered in code after import when ``build_definitions`` calls this again), dropping that of one gone: its
    settings' config (:func:`nested`), a list for ``many`` (a list source), else set to its defaults, or None with
    ``optional``. Whether a section changed (the caller then rebuilds the classes that nest ``model``)."""
    entries = list(entries)
    fields, names = model.__pydantic_fields__, {e.name for e in entries if e.settings is not None}  # type: ignore[attr-defined]
    changed = [name for name in getattr(model, "__sections__", set()) - names if fields.pop(name, None)]
    for entry in (e for e in entries if e.name in names and e.name not in fields):
        many, shape = getattr(entry, "many", False), nested(entry.settings)
        about = f"{what} {entry.name}: {(entry.settings.__doc__ or '').strip()}"
        default = {"default": None} if many or optional else {"default_factory": shape}
        fields[entry.name] = pydantic.Field(description=about, **default)
        fields[entry.name].annotation = list[shape] | None if many else shape | None if optional else shape
        changed.append(entry.name)
    model.__sections__ = names  # type: ignore[attr-defined]
    if changed:
        model.model_rebuild(force=True)  # type: ignore[attr-defined]
    return bool(changed)


def _to_config(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return nested(type(value))(**{f.name: _to_config(getattr(value, f.name)) for f in dataclasses.fields(value)})
    if isinstance(value, (tuple, list)):
        return [_to_config(v) for v in value]
    return value


def domain_value(tp: Any, value: Any) -> Any:
    """The value of type ``tp`` a config ``value`` holds (a derived config: its dataclass, whatever ``tp``)."""
    if value is None:
        return None
    if tp is Path:
        return Path(value)
    if isinstance(value, DerivedConfig):
        return value.to_domain()
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return domain_value(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        return tuple(domain_value(args[0], v) for v in value)
    if origin is list and args:
        return [domain_value(args[0], v) for v in value]
    return value


class DerivedConfig:
    """What :func:`config_from` adds to the Dagster class: ``to_domain``."""

    __domains__: ClassVar[dict[type, tuple[str, ...]]] = {}  # dataclass -> the field names derived from it

    def to_domain(self, cls: type[T] | None = None, **given: Any) -> T:
        """The dataclass ``cls`` (default: the first one derived from) with this config's values;
        ``given`` sets fields the config does not derive (or overrides them)."""
        domains = type(self).__domains__
        cls = cls or next(iter(domains))  # type: ignore[assignment]
        if cls not in domains:
            raise TypeError(f"{type(self).__name__} is not derived from {cls.__name__}")  # type: ignore[union-attr]
        hints = get_type_hints(cls)
        values = {name: domain_value(hints[name], getattr(self, name)) for name in domains[cls] if name not in given}
        return cls(**values, **given)  # type: ignore[misc]


def config_from(
    *domains: type,
    exclude: tuple[str, ...] | set[str] = (),
    aliases: dict[str, str] | None = None,
    base: type = Config,
    only: dict[type, tuple[str, ...] | set[str]] | None = None,
    defaults: dict[str, Any] | None = None,
) -> Any:
    """A ``base`` subclass (Dagster ``Config`` or ``ConfigurableResource``) with the fields of the
    dataclasses ``domains`` (in order; a name seen twice is taken from the first), except ``exclude``;
    ``only`` keeps just the named fields of a dataclass; ``aliases`` renames a field's config key
    (``{field: key}``); ``defaults`` replaces a field's default (``{field: value}``). Subclass it."""
    aliases = aliases or {}
    only = only or {}
    defaults = defaults or {}
    fields: dict[str, Any] = {}
    derived: dict[type, tuple[str, ...]] = {}
    unknown = set(exclude) | set(aliases) | set(defaults) | {n for names in only.values() for n in names}
    for cls in domains:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"config_from takes dataclasses, not {cls!r}")
        hints = get_type_hints(cls)
        names = []
        for f in dataclasses.fields(cls):
            unknown.discard(f.name)
            if f.name in exclude or not f.init or (cls in only and f.name not in only[cls]):
                continue
            names.append(f.name)
            if f.name in fields:
                continue
            kw: dict[str, Any] = {"description": description(f)}
            if f.name in aliases:
                kw["alias"] = aliases[f.name]
            if f.name in defaults:
                kw["default"] = _to_config(defaults[f.name])
            elif f.default is not dataclasses.MISSING:
                kw["default"] = _to_config(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                kw["default_factory"] = lambda make=f.default_factory: _to_config(make())
            fields[f.name] = (_config_type(hints[f.name], f"{cls.__name__}.{f.name}"), pydantic.Field(**kw))
        derived[cls] = tuple(names)
    if unknown:
        raise TypeError(f"no field {sorted(unknown)} in {[c.__name__ for c in domains]}")
    doc = domains[0].__doc__ or ""
    if doc.startswith(f"{domains[0].__name__}("):  # the signature dataclasses writes when there is no docstring
        doc = ""
    model = pydantic.create_model(
        f"{domains[0].__name__}Fields",
        __base__=(base, DerivedConfig),
        __doc__=doc or None,
        __module__=__name__,
        **fields,
    )
    model.__domains__ = derived
    return model


def default_of(function: Any, parameter: str) -> Any:
    """The default of ``function``'s keyword ``parameter`` (as a config value), for a config field that
    passes it on: the default stays written once, in the domain."""
    default = inspect.signature(function).parameters[parameter].default
    if default is inspect.Parameter.empty:
        raise TypeError(f"{function.__qualname__}({parameter}) has no default")
    return _to_config(default)
