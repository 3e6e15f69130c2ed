"""The documents (README.md, docs/*.md, benchmarks/README.md) name only what exists, and
document what exists.

Each check is read off the files with no Django, no server and no browser (so `make
test-quick` runs them): every repository path a document names in backticks or links to exists
(or is one git ignores, made at run time: its being there depends on what ran before);
a file named by its name alone (`turn_start.py`, `chat.js`) is one somewhere in it;
every relative link resolves, to its file and, for `#anchor`, to a heading there (GitHub's
slugs); every target the Makefile defines has its one row in docs/development.md's table, and
every `make X` a document names is a target; every `manage.py X` a document names is a command
(ours, Django's or an installed app's) and every `python -m X` a module of the repository;
every environment variable the code reads is named in docs/configuration.md, and every one its
tables list is read by the code or the Makefile. The code's reads are found with `ast`
(`os.environ.get`, `os.getenv`, `os.environ[...]`, the settings' `env_bool` and `env_list`), so
nothing here imports the modules.
"""

from __future__ import annotations

import ast
import os
import re
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The README, the pages under docs/ and the benchmarks' README, which the README's table lists.
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "benchmarks" / "README.md",
]
CONFIGURATION = ROOT / "docs" / "configuration.md"
DEVELOPMENT = ROOT / "docs" / "development.md"
# Where the code that reads the environment lives (settings are chatapp/settings.py).
ENV_SOURCES = ("chatapp", "gateway_client", "benchmarks", "deploy", "manage.py")
# Calls whose first argument is the name of the variable they read.
ENV_READERS = {"env_bool", "env_list", "getenv"}
# Reads of a variable whose name is not in the code, with why that is right.
DYNAMIC_READS = {
    # The variable an admin names on a gateway row, among those CHAT_KEY_ENV_ALLOWED admits.
    ("chatapp/gateways/key_vault.py", "env_name"),
    # `env_bool`'s own read: its callers, which name the variable, are the reads checked.
    ("chatapp/settings.py", "name"),
}

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)
_MAKE = re.compile(r"^(?:[A-Z_]+=\S*\s+)*make ([a-z][\w-]*)", re.MULTILINE)
_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9_]{2,}\b")
_FILE_NAME = re.compile(r"^[a-z_][\w-]*\.(?:py|js|mjs|html|css)$")  # not `Message.html`, a field
_COMMAND = re.compile(r"\bmanage\.py ([a-z][a-z0-9_]*)")
_MODULE = re.compile(r"\bpython -m ([a-z_][\w.]*)")


@dataclass(frozen=True, slots=True)
class Problem:
    document: str
    what: str

    def __str__(self) -> str:
        return f"{self.document}: {self.what}"


def prose(text: str) -> str:
    """The text without its fenced code blocks (commands and examples, not references)."""
    return _FENCE.sub("", text)


def code_spans(text: str) -> list[str]:
    return [match.group(2).strip() for match in _CODE_SPAN.finditer(prose(text))]


def links(text: str) -> list[str]:
    """Every link and image target, outside code."""
    return _LINK.findall(_CODE_SPAN.sub("", prose(text)))


@cache
def top_level() -> frozenset[str]:
    """The repository's top-level folders: a span that starts with one of them is a path."""
    return frozenset(path.name for path in ROOT.iterdir() if path.is_dir()) - {".git", ".venv"}


def repository_path(span: str) -> str | None:
    """`span` as a path in the repository, or None when it is not one (a URL path such as
    `/u/<pk>/`, a module's dotted name, a command)."""
    if " " in span or "/" not in span or span.startswith(("/", ".venv")):
        return None
    candidate = span.rstrip("/")
    if candidate.split("/", 1)[0] not in top_level():
        return None
    return candidate


@cache
def ignore_rules() -> tuple[tuple[str, str, bool], ...]:
    """The rules of the repository's `.gitignore` files (at the top and one folder down, where
    they are) as (folder, pattern, anchored): gitignore's own rules, but for `!` (none is used)."""
    rules = []
    for ignore in sorted([*ROOT.glob(".gitignore"), *ROOT.glob("*/.gitignore")]):
        folder = str(ignore.parent.relative_to(ROOT)).removeprefix(".")
        for line in ignore.read_text().split("\n"):
            pattern = line.strip()
            if not pattern or pattern.startswith(("#", "!")):
                continue
            pattern = pattern.rstrip("/")
            anchored = "/" in pattern  # a slash but at the end anchors it to its folder
            rules.append((folder, pattern.lstrip("/"), anchored))
    return tuple(rules)


def made_at_run_time(path: str) -> bool:
    """Whether git ignores `path` or a folder it is in: made by `make` (the Node packages of
    `make oidc-provider`), by `collectstatic` or on first run (the development key), never kept
    in the repository. A document may name it before it exists: whether it does depends on what
    ran before, so the check would pass or fail by the order of a run, not by the document."""
    parts = path.split("/")
    for folder, pattern, anchored in ignore_rules():
        inside = folder.split("/") if folder else []
        if parts[: len(inside)] != inside:
            continue
        rest = parts[len(inside) :]
        if anchored:
            if any(fnmatchcase("/".join(rest[:end]), pattern) for end in range(1, len(rest) + 1)):
                return True
        elif any(fnmatchcase(part, pattern) for part in rest):
            return True
    return False


def path_exists(path: str) -> bool:
    """A path, or a pattern of one (`tests/fixtures/streams/<name>-*.http`), that matches; or
    one made at run time, whether it is there now or not."""
    if made_at_run_time(path):
        return True
    if "<" in path or "*" in path:
        return any(ROOT.glob(re.sub(r"<[^>]*>", "*", path)))
    return (ROOT / path).exists()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text, lower-cased, without markup or punctuation but
    hyphens and underscores, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    for _, heading in _HEADING.findall(prose(text)):
        base = slug(heading)
        name, count = base, 0
        while name in found:  # a repeated heading gets -1, -2, …
            count += 1
            name = f"{base}-{count}"
        found.add(name)
    return found


@cache
def file_names() -> frozenset[str]:
    """The names of the repository's files, in any folder (not in a virtualenv, Node's or git's)."""
    skipped = {".git", "node_modules", "__pycache__", "staticfiles"}
    names: set[str] = set()
    for _folder, folders, files in os.walk(ROOT):
        folders[:] = [f for f in folders if f not in skipped and not f.startswith(".venv")]
        names.update(files)
    return frozenset(names)


def path_problems(name: str, text: str) -> Iterator[Problem]:
    for span in code_spans(text):
        path = repository_path(span)
        if path is not None and not path_exists(path):
            yield Problem(name, f"`{span}` does not exist")
        elif path is None and _FILE_NAME.match(span) and span not in file_names():
            yield Problem(name, f"`{span}` is no file of the repository")


def link_problems(document: Path, text: str) -> Iterator[Problem]:
    name = str(document.relative_to(ROOT))
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            yield Problem(name, f"link to {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
            yield Problem(name, f"link to {target}: no heading #{anchor} there")


def named_targets(text: str) -> list[str]:
    """The targets of the `make X` commands a document names: in code spans, and on the lines of
    its code blocks."""
    blocks = "\n".join(match.group(0) for match in _FENCE.finditer(text))
    return _MAKE.findall("\n".join([*code_spans(text), blocks]))


def commands_and_blocks(text: str) -> str:
    """The text of a document's code spans and code blocks, where commands are written."""
    blocks = [match.group(0) for match in _FENCE.finditer(text)]
    return "\n".join([*code_spans(text), *blocks])


def named_commands(text: str) -> list[str]:
    """The `manage.py X` commands a document names."""
    return _COMMAND.findall(commands_and_blocks(text))


def is_command(name: str) -> bool:
    """Whether `manage.py name` runs something: a module of that name in a `management/commands`
    folder of the app, of Django or of an installed package (found by its file, not imported)."""
    installed = Path(sysconfig.get_paths()["purelib"])
    found = (ROOT / "chatapp/management/commands" / f"{name}.py").is_file()
    # A package's commands (`django/core/`, `django/contrib/staticfiles/`, `django_tasks_db/`).
    for depth in ("*", "*/*", "*/*/*"):
        found = found or any(installed.glob(f"{depth}/management/commands/{name}.py"))
    return found


def named_modules(text: str) -> list[str]:
    """The repository's modules a document runs with `python -m X` (not a library's: `-m pip`)."""
    return [
        module
        for module in _MODULE.findall(commands_and_blocks(text))
        if module.split(".")[0] in top_level()
    ]


def is_runnable_module(module: str) -> bool:
    path = ROOT / module.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def make_targets() -> set[str]:
    """The targets the Makefile defines (not its stamp files or variables)."""
    rules = re.findall(r"^([a-z][\w-]*)\s*:(?!=)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    return set(rules)


def documented_targets() -> list[str]:
    """The targets docs/development.md's table has a row for, as often as it has one."""
    return re.findall(r"^\| `make ([a-z][\w-]*)` \|", DEVELOPMENT.read_text(), re.MULTILINE)


@dataclass(frozen=True, slots=True)
class EnvironmentRead:
    source: str
    name: str  # the variable, or a pattern (`LLM_*_TIMEOUT`) for a formatted name
    pattern: bool = False


def python_files() -> Iterator[Path]:
    for entry in ENV_SOURCES:
        path = ROOT / entry
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _is_os_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _read_names(tree: ast.Module) -> Iterator[ast.expr]:
    """The name argument of every read of the environment in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "get"
                and _is_os_environ(func.value)
            ) or called in ENV_READERS:
                yield node.args[0]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_os_environ(node.value)
        ):
            yield node.slice


def environment_reads() -> tuple[list[EnvironmentRead], list[tuple[str, str]]]:
    """What the code reads, and the reads whose name is only known at run time."""
    reads: list[EnvironmentRead] = []
    dynamic: list[tuple[str, str]] = []
    for path in python_files():
        source = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), filename=source)
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for argument in _read_names(tree):
            match argument:
                case ast.Constant(value=str(name)):
                    reads.append(EnvironmentRead(source, name))
                case ast.Name(id=constant) if constant in constants:
                    reads.append(EnvironmentRead(source, constants[constant]))
                case ast.JoinedStr(values=parts):
                    pattern = "".join(
                        part.value if isinstance(part, ast.Constant) else "*" for part in parts
                    )
                    reads.append(EnvironmentRead(source, pattern, pattern=True))
                case _:
                    dynamic.append((source, ast.unparse(argument)))
    return reads, dynamic


def listed_variables() -> set[str]:
    """The variables in the first column of configuration.md's tables of environment variables."""
    section = CONFIGURATION.read_text().split("\n## Environment variables", 1)[1]
    section = section.split("\n## ", 1)[0]
    cells = re.findall(r"^\| (.+?) \|", section, re.MULTILINE)
    return {name for cell in cells for span in code_spans(cell) for name in _VARIABLE.findall(span)}


def makefile_variables() -> set[str]:
    """The variables the Makefile reads (`$(PORT)`, `$(or $(CLUSTER_PORT),8080)`)."""
    return set(re.findall(r"\$\(([A-Z][A-Z0-9_]*)\)", (ROOT / "Makefile").read_text()))


def documented_variables() -> set[str]:
    return {
        name for span in code_spans(CONFIGURATION.read_text()) for name in _VARIABLE.findall(span)
    }


def is_documented(read: EnvironmentRead, documented: set[str]) -> bool:
    if not read.pattern:
        return read.name in documented
    pattern = re.compile(re.escape(read.name).replace(r"\*", "[A-Z0-9_]+") + "$")
    return any(pattern.match(name) for name in documented)


# --- The tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("document", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_path_named_exists(document: Path) -> None:
    name = str(document.relative_to(ROOT))
    assert [str(problem) for problem in path_problems(name, document.read_text())] == []


@pytest.mark.parametrize("document", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    assert [str(problem) for problem in link_problems(document, document.read_text())] == []


def test_there_are_documents_with_paths_and_links() -> None:
    """The control: the checks above read something (a pattern that matched nothing would pass)."""
    readme = (ROOT / "README.md").read_text()
    assert "chatapp/views/chat.py" in [repository_path(span) for span in code_spans(readme)]
    assert "docs/architecture.md#how-a-message-flows" in links(readme)
    assert len(DOCS) >= 8


def test_the_checks_catch_a_missing_path_and_a_broken_anchor() -> None:
    text = (
        "See `chatapp/views/chat.py` and `chatapp/views/no_such_view.py`, "
        "[flows](docs/architecture.md#how-a-message-flows), "
        "[nowhere](docs/architecture.md#no-such-heading) and [gone](docs/gone.md).\n"
    )
    assert [p.what for p in path_problems("README.md", text)] == [
        "`chatapp/views/no_such_view.py` does not exist"
    ]
    named = "`turn_start.py` and `chat.js`, renamed: `no_such_module.py`, `no_such_script.js`"
    assert [p.what for p in path_problems("README.md", named)] == [
        "`no_such_module.py` is no file of the repository",
        "`no_such_script.js` is no file of the repository",
    ]
    assert [p.what for p in link_problems(ROOT / "README.md", text)] == [
        "link to docs/architecture.md#no-such-heading: no heading #no-such-heading there",
        "link to docs/gone.md: no such file",
    ]


def test_a_path_made_at_run_time_may_be_named_whether_it_is_there_or_not() -> None:
    """Whether these exist depends on what ran before in the checkout (`make`, a first run,
    `collectstatic`); the check must not (it failed on a fresh clone for a path a `make` target
    makes, and passed after it ran)."""
    for path in (
        "chatapp/.secret_key",
        "tests/oidc/node_modules",
        "tests/oidc/node_modules/no-such-package/index.js",
        "staticfiles/chatapp/chat.js",
        "chatapp/__pycache__/models.cpython-312.pyc",
    ):
        assert made_at_run_time(path), path
        assert path_exists(path), path
    for path in ("chatapp/views/chat.py", "chatapp/.secret_keys", "tests/oidc/provider.py"):
        assert not made_at_run_time(path), path
    text = "`tests/oidc/node_modules/no-such-package/index.js`, `chatapp/views/no_such_view.py`"
    assert [p.what for p in path_problems("README.md", text)] == [
        "`chatapp/views/no_such_view.py` does not exist"
    ]


def test_slugs_are_githubs() -> None:
    assert slug("A cluster: `make cluster`") == "a-cluster-make-cluster"
    assert slug("`gateway_client`: the stream library") == "gateway_client-the-stream-library"
    assert anchors("# Usage\n\n## Usage\n") == {"usage", "usage-1"}


def test_every_make_target_is_documented_once_in_development() -> None:
    rows = documented_targets()
    assert sorted(rows) == sorted(make_targets())  # each target, once, and no other


def test_every_make_target_a_document_names_exists() -> None:
    targets = make_targets()
    named = {
        (str(document.relative_to(ROOT)), target)
        for document in DOCS
        for target in named_targets(document.read_text())
    }
    assert sorted(named - {(document, t) for document, t in named if t in targets}) == []


def test_every_environment_variable_the_code_reads_is_in_configuration() -> None:
    reads, dynamic = environment_reads()
    documented = documented_variables()
    assert {read.name for read in reads} >= {"LLM_BASE_URL", "DJANGO_SECRET_KEY", "LLM_*_TIMEOUT"}
    missing = sorted({f"{read.name} ({read.source})" for read in reads
                      if not is_documented(read, documented)})  # fmt: skip
    assert missing == []
    assert set(dynamic) == DYNAMIC_READS


def test_every_command_a_document_names_exists() -> None:
    named = {
        (str(document.relative_to(ROOT)), command)
        for document in DOCS
        for command in named_commands(document.read_text())
    }
    assert {command for _, command in named} >= {"run_worker", "fold_ledger", "migrate"}
    assert sorted((document, c) for document, c in named if not is_command(c)) == []


def test_every_module_a_document_runs_exists() -> None:
    named = {
        (str(document.relative_to(ROOT)), module)
        for document in DOCS
        for module in named_modules(document.read_text())
    }
    assert {module for _, module in named} >= {"gateway_client.emulator", "deploy.cluster"}
    assert sorted((document, m) for document, m in named if not is_runnable_module(m)) == []


def test_the_command_checks_catch_what_is_not_there() -> None:
    text = "`manage.py fold_ledger`, `manage.py no_such_command`, `python -m deploy.no_such`\n"
    assert [c for c in named_commands(text) if not is_command(c)] == ["no_such_command"]
    assert [m for m in named_modules(text) if not is_runnable_module(m)] == ["deploy.no_such"]
    assert is_command("collectstatic")  # an installed app's (django.contrib.staticfiles)


def test_every_variable_configuration_lists_is_read() -> None:
    """The reverse of the check above: a variable the tables list that nothing reads (renamed or
    removed in the code) would tell an operator to set what does nothing."""
    reads, _ = environment_reads()
    read = [*reads, *(EnvironmentRead("Makefile", name) for name in makefile_variables())]
    listed = listed_variables()
    assert {"LLM_BASE_URL", "CHAT_CHROMA_URL", "PORT"} <= listed
    unread = sorted(name for name in listed if not any(is_documented(r, {name}) for r in read))
    assert unread == []
