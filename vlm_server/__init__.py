"""Asynchronous batched advisor service (VLM actions, CLIP reward) and its client; independent of found_rl."""
