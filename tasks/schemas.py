"""The shipped tasks' config schemas, registered in Hydra's ConfigStore through the ``ao_calib.config_schemas``
entry point (pyproject.toml), so ``conf/task/<name>.yaml`` starts from them (``defaults: [<name>_schema]``)."""

from hydra.core.config_store import ConfigStore

from .function_call.config import FunctionCallTaskConfig
from .oracle.config import OracleTaskConfig
from .tool_json.config import ToolJsonTaskConfig


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(group="task", name="function_call_schema", node=FunctionCallTaskConfig)
    cs.store(group="task", name="oracle_schema", node=OracleTaskConfig)
    cs.store(group="task", name="tool_json_schema", node=ToolJsonTaskConfig)
