"""The expert dataset: webdataset-style shards of BEV, masks, state, action, caption and chat."""

from found_rl.dataset.shards import ExpertSample, ShardWriter, iter_samples, iter_shard, read_manifest
from found_rl.dataset.text import chat_answer, chat_prompt, chat_sample, clip_caption

__all__ = [
    "ExpertSample",
    "ShardWriter",
    "chat_answer",
    "chat_prompt",
    "chat_sample",
    "clip_caption",
    "iter_samples",
    "iter_shard",
    "read_manifest",
]
