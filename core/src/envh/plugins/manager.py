"""Plugin discovery and the one typed wrapper around envh's hooks.

Entry points of group ``envh`` load one at a time: a broken plugin is reported (name,
version, cause) and skipped. Every hook call is isolated the same way: a plugin whose hook
raises, or returns something other than the records the hook asks for, is recorded in
``Registry.failures`` and the rest of envh goes on (``envh plugins`` shows the failures and
exits 1). ``ENVH_PLUGINS`` (comma-separated allow-list of entry point or distribution
names) and ``ENVH_DISABLE_PLUGINS`` control loading; a name in either that matches no
installed plugin is a failure too, so a typo never silently loads nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from importlib import metadata
from typing import Any, TypeVar

import attrs
import pluggy

from .. import errors
from . import hookspecs
from .records import (
    BridgeInfo,
    ComponentKind,
    Contribution,
    DesignerInfo,
    DiagnoserInfo,
    ExecutorInfo,
    PolicyInfo,
    TemplateInfo,
    TrainerInfo,
    WeaknessInfo,
)

log = logging.getLogger("envh.plugins")
GROUP = "envh"
C = TypeVar("C", bound=Contribution)


@attrs.frozen(kw_only=True)
class PluginFailure:
    """A plugin that could not be loaded or whose hook raised."""

    entry_point: str
    distribution: str
    version: str
    error: str

    def __str__(self) -> str:
        if self.distribution == "(not installed)":
            return f"Plugin selection: {self.error}"
        return (f"Failed to load plugin {self.distribution} {self.version} "
                f"(entry point {self.entry_point}): {self.error}")


@attrs.frozen(kw_only=True)
class PluginInfo:
    """A loaded plugin: the registered name and the distribution providing it."""

    name: str
    distribution: str
    version: str


def _names(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {p.strip() for p in raw.split(",") if p.strip()}


def make_plugin_manager(*, entry_points: bool = True, builtins: bool = True,
                        plugins: Iterable[Any] = ()) -> Registry:
    """A fresh registry: built-ins, then installed entry points, then ``plugins``."""
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    reg = Registry(pm)
    if builtins:
        from .. import __version__
        from . import builtin

        reg.register(builtin, name="envh", distribution="envh", version=__version__)
    if entry_points:
        reg.load_entry_points()
    for plugin in plugins:
        reg.register(plugin)
    return reg


class Registry:
    """Typed access to everything plugins contribute; the only caller of ``pm.hook``."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self.failures: list[PluginFailure] = []
        self.loaded: list[PluginInfo] = []
        self._cache: dict[str, dict[str, Any]] = {}
        self._owners: dict[str, dict[str, str]] = {}

    # -- loading -----------------------------------------------------------------------
    def register(self, plugin: Any, *, name: str | None = None, distribution: str = "(inline)",
                 version: str = "") -> None:
        name = name or getattr(plugin, "__name__", None) or repr(plugin)
        self.pm.register(plugin, name=name)
        self.loaded.append(PluginInfo(name=name, distribution=distribution, version=version))
        self._cache.clear()
        self._owners.clear()

    def _fail(self, plugin_name: str, error: str) -> None:
        info = self.provider(plugin_name)
        self.failures.append(PluginFailure(entry_point=plugin_name, distribution=info.distribution,
                                           version=info.version, error=error))
        log.warning("%s", self.failures[-1])

    def load_entry_points(self) -> None:
        allow, deny = _names("ENVH_PLUGINS"), _names("ENVH_DISABLE_PLUGINS") or set()
        eps = sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name)
        known = {ep.name for ep in eps} | {ep.dist.name for ep in eps if ep.dist is not None} | {"envh"}
        for var in ("ENVH_PLUGINS", "ENVH_DISABLE_PLUGINS"):
            raw = os.environ.get(var, "")
            if raw != "" and not _names(var):  # " , ": a list that lost its names, not a choice
                self.failures.append(PluginFailure(
                    entry_point=var, distribution="(environment)", version="",
                    error=f"{var}={raw!r} names no plugin (only spaces and commas). Set it to plugin names, "
                          "to an empty string for built-ins only, or unset it."))
                log.warning("%s", self.failures[-1])
        for var, names in (("ENVH_PLUGINS", allow or set()), ("ENVH_DISABLE_PLUGINS", deny)):
            for unknown in sorted(names - known):
                self.failures.append(PluginFailure(
                    entry_point=unknown, distribution="(not installed)", version="",
                    error=f"{var} names {unknown!r}, which no installed plugin provides. "
                          f"Installed: {', '.join(sorted(known - {'envh'})) or '(none)'}"))
                log.warning("%s", self.failures[-1])
        for ep in eps:
            dist = ep.dist.name if ep.dist is not None else "(unknown)"
            version = ep.dist.version if ep.dist is not None else ""
            if {ep.name, dist} & deny or (allow is not None and not {ep.name, dist} & allow):
                continue
            if self.pm.has_plugin(ep.name):
                continue
            try:
                module = ep.load()
                self.register(module, name=ep.name, distribution=dist, version=version)
            except Exception as exc:  # noqa: BLE001 - any failure of a plugin is reported
                failure = PluginFailure(entry_point=ep.name, distribution=dist, version=version,
                                        error=repr(exc))
                self.failures.append(failure)
                log.warning("%s", failure)

    def provider(self, plugin_name: str) -> PluginInfo:
        for info in self.loaded:
            if info.name == plugin_name:
                return info
        return PluginInfo(name=plugin_name, distribution="(unknown)", version="")

    # -- collecting --------------------------------------------------------------------
    def _collect(self, hook_name: str, record: type[C]) -> dict[str, C]:
        if hook_name in self._cache:
            return self._cache[hook_name]
        out: dict[str, C] = {}
        owners: dict[str, str] = {}
        hook = getattr(self.pm.hook, hook_name)
        for impl in reversed(hook.get_hookimpls()):  # registration order
            try:
                items = list(impl.function() or [])
            except Exception as exc:  # noqa: BLE001 - one broken plugin must not stop envh
                self._fail(impl.plugin_name, f"{hook_name}() raised {exc!r}")
                continue
            for item in items:
                if not isinstance(item, record):
                    self._fail(impl.plugin_name, f"{hook_name}() returned {item!r:.200}; expected "
                                                 f"{record.__name__} records. The item is skipped.")
                    continue
                if item.name in out:
                    raise errors.PluginConflictError(
                        f"{record.__name__} {item.name!r} is provided by both "
                        f"{self._describe(owners[item.name])} and {self._describe(impl.plugin_name)}. "
                        "Disable one with ENVH_DISABLE_PLUGINS.")
                out[item.name] = item
                owners[item.name] = impl.plugin_name
        self._cache[hook_name] = out
        self._owners[hook_name] = owners
        return out

    def providers(self, hook_name: str) -> dict[str, PluginInfo]:
        """Which plugin contributed each name of ``hook_name`` (e.g. ``envh_bridges``)."""
        record = _RECORDS[hook_name]
        self._collect(hook_name, record)
        return {name: self.provider(owner) for name, owner in self._owners[hook_name].items()}

    def _describe(self, plugin_name: str) -> str:
        info = self.provider(plugin_name)
        return f"{info.distribution} (plugin {plugin_name!r})"

    def _get(self, hook_name: str, record: type[C], what: str, name: str) -> C:
        items = self._collect(hook_name, record)
        if name not in items:
            raise errors.UnknownNameError(what, name, list(items))
        return items[name]

    def bridges(self) -> dict[str, BridgeInfo]:
        return self._collect("envh_bridges", BridgeInfo)

    def bridge(self, name: str) -> BridgeInfo:
        return self._get("envh_bridges", BridgeInfo, "bridge", name)

    def component_kinds(self) -> dict[str, ComponentKind]:
        return self._collect("envh_component_kinds", ComponentKind)

    def component_kind(self, name: str) -> ComponentKind:
        return self._get("envh_component_kinds", ComponentKind, "component kind", name)

    def policies(self) -> dict[str, PolicyInfo]:
        return self._collect("envh_policies", PolicyInfo)

    def policy(self, name: str) -> PolicyInfo:
        return self._get("envh_policies", PolicyInfo, "policy", name)

    def executors(self) -> dict[str, ExecutorInfo]:
        return self._collect("envh_executors", ExecutorInfo)

    def executor(self, name: str) -> ExecutorInfo:
        return self._get("envh_executors", ExecutorInfo, "executor", name)

    def designers(self) -> dict[str, DesignerInfo]:
        return self._collect("envh_designers", DesignerInfo)

    def designer(self, name: str) -> DesignerInfo:
        return self._get("envh_designers", DesignerInfo, "designer", name)

    def diagnosers(self) -> dict[str, DiagnoserInfo]:
        return self._collect("envh_diagnosers", DiagnoserInfo)

    def trainers(self) -> dict[str, TrainerInfo]:
        return self._collect("envh_trainers", TrainerInfo)

    def templates(self) -> dict[str, TemplateInfo]:
        return self._collect("envh_templates", TemplateInfo)

    def weakness_predicates(self) -> dict[str, WeaknessInfo]:
        return self._collect("envh_weakness_predicates", WeaknessInfo)

    def _call_each(self, hook_name: str, **kwargs: Any) -> None:
        """Call every implementation of a side-effect hook; one that raises is recorded
        as a failure of its plugin and the others still run."""
        for impl in reversed(getattr(self.pm.hook, hook_name).get_hookimpls()):
            try:
                impl.function(*[kwargs[a] for a in impl.argnames])
            except Exception as exc:  # noqa: BLE001 - one broken plugin must not stop envh
                self._fail(impl.plugin_name, f"{hook_name}() raised {exc!r}")

    def register_commands(self, cli: Any) -> None:
        self._call_each("envh_register_commands", cli=cli)

    def configure_converter(self, converter: Any) -> None:
        self._call_each("envh_configure_converter", converter=converter)


_RECORDS: dict[str, type[Any]] = {
    "envh_bridges": BridgeInfo, "envh_component_kinds": ComponentKind, "envh_policies": PolicyInfo,
    "envh_executors": ExecutorInfo, "envh_designers": DesignerInfo, "envh_diagnosers": DiagnoserInfo,
    "envh_trainers": TrainerInfo, "envh_templates": TemplateInfo,
    "envh_weakness_predicates": WeaknessInfo,
}


_default: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry (built on first use from installed plugins)."""
    global _default
    if _default is None:
        _default = make_plugin_manager()
    return _default


def set_registry(registry: Registry | None) -> None:
    """Replace the process-wide registry (tests; embedding applications)."""
    global _default
    _default = registry
