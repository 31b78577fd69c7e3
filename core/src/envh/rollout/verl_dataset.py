"""verl's multi-turn SFT dataset for ``envh export --format verl`` files (needs verl).

verl reads the Parquet with pandas and passes each row's ``tools`` to the chat template.
The export keeps ``tools`` as the exact JSON text of the tool list (Arrow structs would
give every tool the other tools' parameter names as nulls) and ``messages`` as structs
in which a message without calls has ``tool_calls``/``tool_call_id`` null. This subclass
decodes both (``envh.rollout.export.decode_verl_frame``) before verl tokenises anything.
Point verl's custom dataset option at this file::

    data.custom_cls.path=$(python -c 'import envh.rollout.verl_dataset as m; print(m.__file__)')
    data.custom_cls.name=EnvhMultiTurnSFTDataset

Importing this module imports verl; nothing else in envh does.
"""

from __future__ import annotations

from typing import Any

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset  # type: ignore[import-not-found]

from envh.rollout.export import decode_verl_frame


class EnvhMultiTurnSFTDataset(MultiTurnSFTDataset):  # type: ignore[misc]
    """``MultiTurnSFTDataset`` over envh's verl export, with ``messages`` and ``tools``
    decoded to exactly what the model was shown and wrote."""

    def _read_files_and_process(self) -> None:
        super()._read_files_and_process()
        frame: Any = decode_verl_frame(getattr(self, "dataframe"), self.messages_key, self.tools_key)  # noqa: B009
        self.dataframe = frame
        self.messages = frame[self.messages_key].tolist()
        if self.tools_key in frame.columns:
            self.tools = frame[self.tools_key].tolist()
