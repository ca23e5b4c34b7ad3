"""Small text and number helpers."""


def clamp(value, low, high):
    """Limit value to the closed range [low, high]."""
    if value < low:
        return low
    if value > high:
        return high
    return value


def mean(values):
    """Arithmetic mean; None for an empty sequence."""
    if not values:
        return None
    return sum(values) / len(values)


def chunk(items, size=2):
    """Split items into lists of `size` (the last may be shorter)."""
    if size <= 0:
        raise ValueError("size must be positive")
    return [items[i:i + size] for i in range(0, len(items), size)]


def word_count(text, sep=None):
    """Number of words in text (None counts as empty)."""
    if text is None:
        return 0
    return len(text.split(sep))


def pad_left(text, width, fill=" "):
    """Right-align text in a field of `width` characters."""
    missing = width - len(text)
    if missing <= 0:
        return text
    return fill * missing + text
