"""Shared pytest setup: keep torch on few threads so the suite behaves on 2-core CI."""

import torch

torch.set_num_threads(1)
