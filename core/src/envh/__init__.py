"""envh: programmable training worlds from static agent benchmarks.

A *bridge* puts a benchmark behind ``ActionableEnv``; *components* (``EnvHarness``
subclasses: stage, contract, chain, budget, and kinds from plugins) reshape it at that
interface while the benchmark's verifier keeps the final word. ``make(spec)`` builds a
stack from a declarative spec.
"""

from . import errors
from .bridge import Bridge
from .env import ActionableEnv
from .harness import EnvHarness, iter_layers
from .hostpaths import grant, host_paths  # host paths a spec names, and the grant that lets it
from .plugins import (
                      BridgeInfo,
                      ComponentKind,
                      DesignerInfo,
                      DiagnoserInfo,
                      ExecutorInfo,
                      PolicyInfo,
                      Registry,
                      TemplateInfo,
                      TrainerInfo,
                      WeaknessInfo,
                      get_registry,
                      hookimpl,
                      make_plugin_manager,
)
from .spec import BuildContext, EnvSpec, LayerSpec, make, parse_spec, spec_id, spec_to_data
from .types import (
                      Action,
                      Answer,
                      Block,
                      EnvResponse,
                      EvaluationResult,
                      Observation,
                      ResetResult,
                      TaskRef,
                      ToolSpec,
)
from .validation import compile_tools  # tool-call checkers from tool schemas (designers check stage actions)

__version__ = "0.1.0"

__all__ = [
    "Action", "ActionableEnv", "Answer", "Block", "Bridge", "BridgeInfo", "BuildContext", "ComponentKind",
    "DesignerInfo", "DiagnoserInfo", "EnvHarness", "EnvResponse", "EnvSpec", "EvaluationResult",
    "ExecutorInfo", "LayerSpec", "Observation", "PolicyInfo", "Registry", "ResetResult", "TaskRef",
    "TemplateInfo", "ToolSpec", "TrainerInfo", "WeaknessInfo", "compile_tools", "errors", "get_registry", "hookimpl", "iter_layers",
    "make", "make_plugin_manager", "parse_spec", "spec_id", "spec_to_data", "__version__",
    "grant", "host_paths",
]
