"""Python source parsed into ``ast`` trees, one conversion at a time per process.

CPython 3.11 builds the ``ast`` objects of a parse with a recursion counter that the
whole interpreter shares (gh-106905): two threads parsing at once can leave it
unbalanced, and a correct file then fails to parse with ``SystemError: AST constructor
recursion depth mismatch``. The analysis parses from several threads (the local
verifier's slots), so every parse of it goes through this lock; one takes milliseconds.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["compile_module", "parse_expression", "parse_module"]

_CONVERTING = threading.Lock()


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, never concurrently with another parse here.

    Raises:
        SyntaxError: *source* is not Python (as ``ast.parse`` raises it).
    """
    with _CONVERTING:
        return ast.parse(source, filename=filename)


def parse_expression(source: str) -> ast.expr:
    """The expression *source* (``ast.parse(source, mode="eval").body``), as above.

    Raises:
        SyntaxError: *source* is not one Python expression.
    """
    with _CONVERTING:
        return ast.parse(source, mode="eval").body


def compile_module(tree: ast.Module, filename: str) -> None:
    """Compile (not run) *tree*, as above: what the parser lets through and the compiler
    refuses (``return`` outside a function, a misplaced ``nonlocal``) raises here.

    Raises:
        SyntaxError: The compiler refuses *tree*.
        ValueError: *tree* is malformed.
    """
    with _CONVERTING:
        compile(tree, filename, "exec", dont_inherit=True)
