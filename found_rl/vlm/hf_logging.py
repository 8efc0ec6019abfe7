"""Quiet Hugging Face output while ``found-rl vlm`` and ``bench vlm`` print their own progress."""

from __future__ import annotations

import warnings

from found_rl.errors import UserError


def quiet_transformers() -> None:
    """No weight-loading progress bars or advisory warnings between ours."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise UserError(f"found-rl vlm needs the hf extra: pip install 'found-rl[hf]' ({exc})") from None
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # peft calls a transformers property that v5 deprecates; nothing a user can act on
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
