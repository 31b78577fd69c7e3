"""verl's multi-turn SFT dataset for ``envh export --format verl`` files (needs verl).

verl reads the Parquet with pandas and passes each row's ``tools`` to the chat template.
The export keeps ``tools`` as the exact JSON text of the tool list (Arrow structs would
give every tool the other tools' parameter names as nulls) and ``messages`` as structs
in which a message without calls has ``tool_calls``/``tool_call_id`` null. This subclass
decodes both (``envh.rollout.export.decode_verl_frame``) before verl tokenises anything,
and in a per-request row (``envh export --per-request``: ``prompt_messages`` > 0) puts the
loss on the reply only: the assistant messages of the request are context, not targets.
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

    _context_messages = 0

    def _read_files_and_process(self) -> None:
        super()._read_files_and_process()
        frame: Any = decode_verl_frame(getattr(self, "dataframe"), self.messages_key, self.tools_key)  # noqa: B009
        self.dataframe = frame
        self.messages = frame[self.messages_key].tolist()
        if self.tools_key in frame.columns:
            self.tools = frame[self.tools_key].tolist()
        column = frame["prompt_messages"] if "prompt_messages" in frame.columns else None
        self.context_messages = [0] * len(frame) if column is None else [int(n) for n in column]

    def __getitem__(self, item: int) -> Any:
        self._context_messages = self.context_messages[item]
        try:
            return super().__getitem__(item)
        finally:
            self._context_messages = 0

    def _process_single_message(self, index: int, message: dict[str, Any], **kwargs: Any) -> Any:
        input_ids, loss_mask, attention_mask, inputs = super()._process_single_message(
            index=index, message=message, **kwargs)
        if index < self._context_messages:
            loss_mask = loss_mask * 0
        return input_ids, loss_mask, attention_mask, inputs
