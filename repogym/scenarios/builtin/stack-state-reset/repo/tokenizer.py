"""Tokenizer for the arithmetic expressions in our pricing rules (``2*(base + 10)``)."""

from __future__ import annotations

OPERATORS = frozenset("+-*/")


class TokenizeError(ValueError):
    """The text is not a well-formed expression (bad character or unbalanced brackets)."""


class Tokenizer:
    """Split expressions into number, name, operator and bracket tokens.

    One ``Tokenizer`` is created at start-up and reused for every rule, so each call to
    :meth:`tokenize` must be independent of the calls before it, including calls that
    raised :class:`TokenizeError`.

    Example:
        >>> Tokenizer().tokenize("2*(base + 10)")
        ['2', '*', '(', 'base', '+', '10', ')']
    """

    def __init__(self) -> None:
        self._tokens: list[str] = []
        self._word: list[str] = []
        self._open: list[int] = []  # positions of "(" not closed yet

    def tokenize(self, text: str) -> list[str]:
        """Return the tokens of ``text``; whitespace separates tokens and is dropped.

        Raises:
            TokenizeError: On a character that is not a letter, digit, ``_``, ``.``, an
                operator, a bracket or whitespace, or when brackets do not balance.
        """
        for position, char in enumerate(text):
            if char.isalnum() or char in "_.":
                self._word.append(char)
                continue
            self._end_word()
            if char.isspace():
                continue
            if char == "(":
                self._open.append(position)
            elif char == ")":
                if not self._open:
                    raise TokenizeError(f"unmatched ')' at position {position}")
                self._open.pop()
            elif char not in OPERATORS:
                raise TokenizeError(f"unexpected character {char!r} at position {position}")
            self._tokens.append(char)
        self._end_word()
        if self._open:
            raise TokenizeError(f"unclosed '(' at position {self._open[-1]}")
        return self._tokens

    def _end_word(self) -> None:
        """Emit the number or name being read, if any."""
        if self._word:
            self._tokens.append("".join(self._word))
            self._word = []
