"""The docs say what the code does: worked examples reproduce, cited paths and links resolve,
nothing cites files outside the repository, and every mechanism page has the same sections."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_wire_format_worked_example_reproduces():
    with open(os.path.join(ROOT, "docs", "wire-format.md"), encoding="utf-8") as fh:
        page = fh.read()
    script = re.search(r"python3 - <<'EOF'\n(.*?)\nEOF\n", page, re.S).group(1)
    shown = re.search(r"Output:\n\n```\n(.*?)\n```", page, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == shown.strip()


def test_config_example_is_what_the_planner_writes(tmp_path):
    import json
    import shlex

    from click.testing import CliRunner

    from edgesynth.cli import main
    with open(os.path.join(ROOT, "docs", "config.md"), encoding="utf-8") as fh:
        page = fh.read()
    example = page[page.index("### Example"):]
    command, printed = re.search(r"```\n(edgesynth plan .*?)\n(wrote .*?)\n```", example, re.S).groups()
    shown = json.loads(re.search(r"```json\n(.*?)\n```", example, re.S).group(1))
    args = shlex.split(command.replace("\\\n", " "))[1:]
    out = tmp_path / "device.json"
    args[args.index("-o") + 1] = str(out)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert res.output.strip() == printed.replace("device.json", str(out), 1)
    assert json.loads(out.read_text()) == shown


# Paths cited in code and docs: repo-relative, under one of the project's folders.
CITED = re.compile(r"(?<![\w./<>-])((?:agent|firmware_shims|host_tools|docs|tests|benchmarks)/[\w./*<>{}-]*?"
                   r"\.(?:py|md|c|h|ld))(?![\w/])")
# Paths that name no file of the repository: tests/test_imports.py writes them into a temporary
# tree (and this file lists them here).
NOT_CITATIONS = {"agent/m.py", "agent/n.py"}
NOT_CITATIONS_IN = {"tests/test_imports.py", "tests/test_docs.py"}
SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", ".benchmarks"}
MECHANISM_PAGES = ("privhp", "cdf", "profile", "phdstream", "marginals")


def _sources():
    """(relative path, text) of every .py, .md, .c and .h file of the repository."""
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in files:
            if name.endswith((".py", ".md", ".c", ".h")):
                path = os.path.join(top, name)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    yield os.path.relpath(path, ROOT), fh.read()


def _exists(cited):
    """A cited path exists; a placeholder (``agent/<name>/``) names a pattern, not a file."""
    if "<" in cited or "{" in cited:
        return True
    if "*" in cited:
        import glob
        return bool(glob.glob(os.path.join(ROOT, cited)))
    return os.path.exists(os.path.join(ROOT, cited))


def test_every_cited_path_exists():
    missing = []
    for rel, text in _sources():
        for n, line in enumerate(text.splitlines(), 1):
            missing += ["%s:%d: %s" % (rel, n, m.group(1)) for m in CITED.finditer(line)
                        if not _exists(m.group(1))
                        and not (m.group(1) in NOT_CITATIONS and rel in NOT_CITATIONS_IN)]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_nothing_cites_files_outside_the_repository():
    """The design notes, the paper texts and the design document are not in the repository:
    cite the paper and section, or the project's own docs."""
    outside = re.compile(r"note[s]/[\w-]+[.]md|paper[s]/|DESIGN[.]md")
    found = ["%s:%d" % (rel, n) for rel, text in _sources()
             for n, line in enumerate(text.splitlines(), 1) if outside.search(line)]
    assert not found, "cites files that are not in the repository:\n" + "\n".join(found)


def _slug(heading):
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_docs_resolve():
    docs = os.path.join(ROOT, "docs")
    broken = []
    for rel, text in _sources():
        if not rel.startswith("docs" + os.sep) and rel != "README.md":
            continue
        here = os.path.dirname(os.path.join(ROOT, rel))
        for target, anchor in re.findall(r"\]\(([\w./-]+\.md)(?:#([\w-]+))?\)", text):
            path = os.path.normpath(os.path.join(here, target))
            if not os.path.exists(path):
                broken.append("%s: %s" % (rel, target))
            elif anchor:
                with open(path, encoding="utf-8") as fh:
                    anchors = {_slug(h) for h in re.findall(r"^#+ (.*)$", fh.read(), re.M)}
                if anchor not in anchors:
                    broken.append("%s: %s#%s" % (rel, target, anchor))
    assert os.path.isdir(docs)
    assert not broken, "links to missing pages or headings:\n" + "\n".join(broken)


def test_mechanism_pages_share_their_sections():
    """docs/mechanisms/<name>.md: the same sections, in the same order, for every mechanism."""
    heads = {}
    for name in MECHANISM_PAGES:
        with open(os.path.join(ROOT, "docs", "mechanisms", name + ".md"), encoding="utf-8") as fh:
            heads[name] = re.findall(r"^## (.*)$", fh.read(), re.M)
    assert heads["privhp"] == ["Device state", "Privacy argument", "Wire map", "Host algorithms", "Planner",
                               "Measured figures"]
    assert all(h == heads["privhp"] for h in heads.values()), heads


def test_every_registered_mechanism_has_its_page():
    from edgesynth.agent.wire import MECHANISMS
    assert tuple(MECHANISM_PAGES) == MECHANISMS
