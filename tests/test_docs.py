"""The README and the guides stay true and short: every relative link lands on a file and a heading, each page
stays within its length, and every `yardstick ...` line in a shell block names a command and flags the CLI's
own parser knows. Nothing is run: the parser is read, not invoked."""

from __future__ import annotations

import functools
import re
import shlex
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.core
import typer.main

from yardstick.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *GUIDES]
README_MAX_LINES = 400
GUIDE_MAX_LINES = 500

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SHELLS = {"bash", "sh", "shell", "console"}
# A shell block's `<id>`-style placeholders would read as redirections.
PLACEHOLDER = re.compile(r"<[A-Za-z][\w .-]*>")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = {";", "&&", "||", "|", "&"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the block's first content line
    language: str
    text: str


def split_page(page: Path) -> tuple[list[tuple[int, str]], list[Block]]:
    """The page's prose lines (numbered) and its fenced blocks."""
    prose: list[tuple[int, str]] = []
    blocks: list[Block] = []
    fence: str | None = None
    language = ""
    body: list[str] = []
    start = 0
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        opened = FENCE.match(line)
        if fence is None:
            if opened:
                fence, language, body, start = opened.group(1), opened.group(2).lower(), [], number + 1
            else:
                prose.append((number, line))
        elif line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
            blocks.append(Block(page, start, language, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    return prose, blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in {"L", "N"})
    return kept.replace(" ", "-")


@functools.cache
def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in split_page(page)[0]:
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    for number, line in split_page(page)[0]:
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            where = (page.parent / path_part).resolve() if path_part else page
            name = f"{page.relative_to(root)}:{number}: {target}"
            if not where.exists():
                problems.append(f"{name}: no file {where.relative_to(root)}")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                problems.append(f"{name}: no heading #{anchor} in {where.relative_to(root)}")
    return problems


@dataclass(frozen=True)
class Shown:
    """A `yardstick ...` command as a page shows it."""

    where: str
    words: list[str]


def yardstick_commands(block: Block) -> list[Shown]:
    """Every command in a shell block whose program is `yardstick` (any path to it), with its words."""
    commands: list[Shown] = []
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        first = index
        line = lines[index]
        while line.rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
            line = line.rstrip()[:-1] + " " + lines[index]
        index += 1
        lexer = shlex.shlex(PLACEHOLDER.sub("PLACEHOLDER", line), posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words = list(lexer)
        segment: list[str] = []
        for word in [*words, ";"]:
            if word not in SEPARATORS:
                segment.append(word)
                continue
            while segment and ENV_ASSIGNMENT.match(segment[0]):
                segment.pop(0)
            if segment and Path(segment[0]).name == "yardstick":
                where = f"{block.page.relative_to(ROOT)}:{block.line + first}"
                commands.append(Shown(where, segment[1:]))
            segment = []
    return commands


@functools.cache
def the_cli() -> typer.core.TyperGroup | typer.core.TyperCommand:
    return typer.main.get_command(app)


def cli_problem(words: list[str]) -> str | None:
    """Why the CLI's parser would not know these words as a command and its flags; None when it would."""
    command = the_cli()
    path = ["yardstick"]
    rest = list(words)
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        sub = command.commands.get(name)
        if sub is None:
            known = ", ".join(sorted(command.commands))
            return f"`{' '.join(path)}` has no subcommand {name!r} (it has: {known})"
        command, path = sub, [*path, name]
    flags = {"--help"}
    for param in command.params:
        flags.update(o for o in [*param.opts, *param.secondary_opts] if o.startswith("-"))
    for word in rest:
        if word == "--":
            break
        flag = word.strip("[]").split("=", 1)[0]
        if not flag.startswith("-") or flag == "-" or re.match(r"^-\d", flag):
            continue
        if flag not in flags:
            return f"`{' '.join(path)}` has no flag {flag} (it has: {', '.join(sorted(flags))})"
    if hasattr(command, "commands"):
        return f"`{' '.join(path)}` names no subcommand (it has: {', '.join(sorted(command.commands))})"
    return None


def shown_commands() -> list[Shown]:
    return [
        shown
        for page in PAGES
        for block in split_page(page)[1]
        if block.language in SHELLS
        for shown in yardstick_commands(block)
    ]


def test_every_relative_link_lands_on_a_file_and_a_heading() -> None:
    problems = [problem for page in PAGES for problem in broken_links(page)]
    assert not problems, "\n".join(problems)


def test_the_readme_and_each_guide_stay_short() -> None:
    readme = len(README.read_text(encoding="utf-8").splitlines())
    assert readme <= README_MAX_LINES, (
        f"README.md is {readme} lines, past {README_MAX_LINES}: move detail to docs/"
    )
    long = {
        str(guide.relative_to(ROOT)): n
        for guide in GUIDES
        if (n := len(guide.read_text(encoding="utf-8").splitlines())) > GUIDE_MAX_LINES
    }
    assert not long, f"guides past {GUIDE_MAX_LINES} lines: {long}: split them by subject"


def test_the_readme_map_links_every_guide() -> None:
    linked = {
        (README.parent / target.partition("#")[0]).resolve()
        for _, line in split_page(README)[0]
        for target in LINK.findall(line)
    }
    missing = [str(g.relative_to(ROOT)) for g in GUIDES if g.resolve() not in linked]
    assert not missing, f"guides the README does not link: {missing}"


def test_every_yardstick_command_shown_is_one_the_cli_knows() -> None:
    shown = shown_commands()
    # The pages show dozens; a parse that finds few would check nothing.
    assert len(shown) >= 40, f"found only {len(shown)} yardstick commands in the pages' shell blocks"
    problems = [
        f"{s.where}: yardstick {' '.join(s.words)}\n  {p}" for s in shown if (p := cli_problem(s.words))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (".venv/bin/yardstick eval run -b mt10 --no-such-flag 3", "has no flag --no-such-flag"),
        ("yardstick evaluate run", "has no subcommand 'evaluate'"),
        ("yardstick admin key", "names no subcommand"),
        ("export A=1; X=2 yardstick server --prot 8080 # a typo", "has no flag --prot"),
    ],
)
def test_the_command_check_catches_what_the_cli_would_refuse(tmp_path: Path, line: str, why: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"```bash\n{line}\n```\n", encoding="utf-8")
    block = Block(README, 1, "bash", split_page(page)[1][0].text)
    [shown] = yardstick_commands(block)
    problem = cli_problem(shown.words)
    assert problem is not None and why in problem, problem


def test_the_link_check_catches_a_missing_file_and_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A part\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#a-part) [gone](nothere.md) [no part](other.md#b-part) [self](#page)\n"
        "```bash\n[not a link](nothere.md)\n```\n",
        encoding="utf-8",
    )
    problems = broken_links(page, root=tmp_path)
    assert len(problems) == 2, problems
    assert "no file nothere.md" in problems[0]
    assert "no heading #b-part" in problems[1]
