"""A tiny package used to test `repogym synth`."""

from textstats.core import chunk, clamp, mean, pad_left, word_count

__all__ = ["chunk", "clamp", "mean", "pad_left", "word_count"]
