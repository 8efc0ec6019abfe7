"""FAST: lock-step parallel sampling with virtual continuation and mask-weighted losses; independent of found_rl."""
