"""Plugin system: hook specs, contribution records, discovery."""

from .hookspecs import hookimpl, hookspec
from .manager import PluginFailure, Registry, get_registry, make_plugin_manager, set_registry
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
                      resolve,
)

__all__ = [
    "BridgeInfo", "ComponentKind", "Contribution", "DesignerInfo", "DiagnoserInfo", "ExecutorInfo",
    "PluginFailure", "PolicyInfo", "Registry", "TemplateInfo", "TrainerInfo", "WeaknessInfo", "get_registry",
    "hookimpl", "hookspec", "make_plugin_manager", "resolve", "set_registry",
]
