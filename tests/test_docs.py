"""The worked example of docs/wire-format.md still prints what the page says."""
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
