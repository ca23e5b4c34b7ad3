"""Small helpers whose failures show default reprs (with memory addresses) and paths."""

import os


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


def shift(p, dx):
    """Move a point right by dx."""
    return Point(p.x + dx, p.y)


def scratch_name(folder, name):
    """The path of a scratch file called `name`.txt in folder."""
    return os.path.join(folder, name + '.txt')
