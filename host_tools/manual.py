"""The user documentation that ships with edgesynth: `edgesynth docs`.

The repository's docs/*.md (and docs/mechanisms/*.md) are installed as
package data, edgesynth/docs/, so help texts can cite a page by its topic
("edgesynth docs privacy") and a user reaches it after `pip install`.
"""
import os

from edgesynth.errors import InputError

_HERE = os.path.dirname(os.path.abspath(__file__))
# An installed wheel has edgesynth/docs/; a source checkout (and the editable
# install, whose finder maps the package to host_tools/) has the repository's docs/.
_ROOTS = (os.path.join(_HERE, "docs"), os.path.join(os.path.dirname(_HERE), "docs"))


def docs_dir():
    """Absolute path of the directory holding the documentation pages."""
    for root in _ROOTS:
        if os.path.isdir(root):
            return root
    raise InputError("the documentation is not installed (looked in %s)" % " and ".join(_ROOTS))


def docs_topics():
    """Sorted topic names, one per page: a page's path below the docs
    directory without ``.md`` ("privacy", "mechanisms/cdf")."""
    root = docs_dir()
    found = []
    for base, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for f in files:
            if f.endswith(".md"):
                rel = os.path.relpath(os.path.join(base, f[:-3]), root)
                found.append(rel.replace(os.sep, "/"))
    return sorted(found)


def docs_path(topic):
    """Absolute path of the page of ``topic``: a name from docs_topics(), or
    the last part of one when only one page has it ("cdf" for
    "mechanisms/cdf"). InputError listing the topics otherwise."""
    topics = docs_topics()
    name = str(topic).strip().strip("/")
    if name.endswith(".md"):
        name = name[:-3]
    if name not in topics:
        tails = [t for t in topics if t.rsplit("/", 1)[-1] == name]
        if len(tails) != 1:
            raise InputError("no documentation page %r (topics: %s)" % (topic, ", ".join(topics)))
        name = tails[0]
    return os.path.join(docs_dir(), *name.split("/")) + ".md"


def docs_title(topic):
    """The first heading of ``topic``'s page, without its ``#`` marks."""
    with open(docs_path(topic), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return ""
