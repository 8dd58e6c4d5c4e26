"""Every command the README shows exists as written.

Each ``tflite-train`` command of the README's fenced shell blocks is parsed by the real argument parser
(``tflite_train.cli.build_parser``), so an unknown subcommand, a misspelt or removed flag, a value of the
wrong type, a choice that is not offered or a missing required flag fails this test; flags must be spelt
in full (argparse would accept an abbreviation, a reader copying it should not rely on that). Nothing is
run. Every ``make`` target the README names (in code blocks and inline code) is a Makefile target, and
every ``pip install .[extra]`` names an extra of the package. The Python example runs in
``tests/runtime/test_readme_example.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import pathlib
import re
import shlex

import pytest

from tflite_train.cli import build_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SHELL_LANGUAGES = ("bash", "sh", "shell", "console", "")
PROGRAM = "tflite-train"
OPERATORS = ("&&", "||", "|", ";", "&")

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)
_INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_EXTRAS = re.compile(r"pip install \S*?\.\[([\w,-]+)\]")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block of a markdown ``text``."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def shell_commands(text: str) -> list[list[str]]:
    """The commands of ``text``'s shell code blocks, as word lists: one per logical line (backslash
    continuations joined) and shell operator (``&&``, ``|``, ``;``), without a ``$ `` prompt or a
    ``# comment``."""
    commands = []
    for language, body in code_blocks(text):
        if language in SHELL_LANGUAGES:
            for line in body.replace("\\\n", " ").splitlines():
                commands += split_command(line.strip().removeprefix("$ "))
    return commands


def split_command(line: str) -> list[list[str]]:
    """The simple commands of one shell ``line`` (words; operators and comments dropped; a line that is not
    shell, with an unbalanced quote, is split at white space)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = line.split()
    commands, words = [], []
    for token in tokens:
        if token in OPERATORS:
            commands.append(words)
            words = []
        else:
            words.append(token)
    return [c for c in (*commands, words) if c]


def program_argv(words: list[str]) -> list[str] | None:
    """The arguments of a ``tflite-train`` command (also ``.venv/bin/tflite-train``), else None."""
    if words and pathlib.PurePosixPath(words[0]).name == PROGRAM:
        return words[1:]
    return None


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def argv_problem(argv: list[str]) -> str | None:
    """Why ``tflite-train <argv>`` would not parse, or None: every flag spelt in full as one of the
    options of the (sub)commands it follows, then the parser's own verdict."""
    parser = build_parser()
    allowed, current = _option_strings(parser), parser
    for token in argv:
        if token.startswith("-") and not re.fullmatch(r"-\d[\d.e-]*", token):
            flag = token.split("=", 1)[0]
            if flag not in allowed:
                return f"unknown flag {flag}"
        elif _subparsers(current):
            if token not in _subparsers(current):
                return f"unknown command {token}"
            current = _subparsers(current)[token]
            allowed |= _option_strings(current)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as exit_info:
        if exit_info.code:
            return stderr.getvalue().strip() or f"exit {exit_info.code}"
    return None


def make_targets(text: str) -> list[str]:
    """Targets of every ``make`` command in ``text`` (shell code blocks and inline code)."""
    commands = shell_commands(text) + [c for span in _INLINE_CODE.findall(text) for c in split_command(span)]
    return [w for words in commands if words[0] == "make" for w in words[1:] if "=" not in w and not w.startswith("-")]


def defined_make_targets() -> set[str]:
    return set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))


def package_extras() -> str:
    """The packaging files' text, where the extras are declared."""
    return "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "setup.py", ROOT / "pyproject.toml") if p.exists())


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_every_tflite_train_command_of_the_readme_parses():
    commands = [argv for words in shell_commands(_readme()) if (argv := program_argv(words)) is not None]
    assert len(commands) >= 10, "the README shows fewer tflite-train commands than expected: is the extraction broken?"
    problems = [f"tflite-train {shlex.join(argv)}\n    {p}" for argv in commands if (p := argv_problem(argv))]
    assert not problems, "README commands that do not parse:\n" + "\n".join(problems)


def test_every_make_target_of_the_readme_exists():
    targets = make_targets(_readme())
    assert "test" in targets, "the README must say that `make test` runs the whole suite (.ci/run runs it)"
    missing = sorted(set(targets) - defined_make_targets())
    assert not missing, f"README names make targets the Makefile lacks: {missing}"


def test_the_readme_says_make_test_runs_the_whole_suite():
    assert re.search(r"`make test` runs the whole test suite", _readme())


def test_every_pip_extra_of_the_readme_is_declared():
    extras = {e for group in _EXTRAS.findall(_readme()) for e in group.split(",")}
    assert {"train", "pi"} <= extras
    declared = package_extras()
    missing = sorted(e for e in extras if not re.search(rf"[\"']?\b{re.escape(e)}\b[\"']?\s*[:=]", declared))
    assert not missing, f"README installs extras the package does not declare: {missing}"


def test_the_python_example_compiles():
    blocks = [body for language, body in code_blocks(_readme()) if language == "python"]
    assert blocks, "the README has no Python example"
    for body in blocks:
        compile(body, "README.md", "exec")


SAMPLE = """
```bash
tflite-train adapt --model m.tflite --support photos/ --out c.ckpt --mem-budgets 1MiB   # misspelt flag
tflite-train adapt --model m.tflite --support photos/ --out c.ckpt --mem 1MiB           # abbreviated
tflite-train adapt --model m.tflite --support photos/ --out c.ckpt --on-empty never    # not a choice
tflite-train adapt --model m.tflite --support photos/ --out c.ckpt --mem-budget lots    # not a size
tflite-train adapt --model m.tflite --support photos/                                   # --out missing
tflite-train export --out m.tflite --backbone resnet                                    # not a choice
tflite-train exprot --out m.tflite                                                      # no such command
tflite-train data prepare --out build/cache --image-size 64                             # fine
.venv/bin/tflite-train -v predict --model m.tflite --checkpoint c.ckpt \\
    --csv a.jpg b.jpg                                                                   # fine
$ make demo && echo
```
Run `make tests` or `make test`.
"""


@pytest.mark.parametrize("line,expected", [
    (0, "unknown flag --mem-budgets"), (1, "unknown flag --mem"), (2, "invalid choice"), (3, "--mem-budget"),
    (4, "--out"), (5, "invalid choice"), (6, "unknown command exprot"), (7, None), (8, None),
])
def test_the_check_finds_a_command_that_does_not_parse(line, expected):
    commands = [program_argv(c) for c in shell_commands(SAMPLE)]
    problem = argv_problem(commands[line])
    assert (problem is None) if expected is None else (problem is not None and expected in problem), problem


def test_the_check_finds_a_missing_make_target():
    assert make_targets(SAMPLE) == ["demo", "tests", "test"]
    assert set(make_targets(SAMPLE)) - defined_make_targets() == {"tests"}
