"""Agents tests: one torch thread (spinning OpenMP threads crawl on a shared 2-core box)."""

import torch

torch.set_num_threads(1)
