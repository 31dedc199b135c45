"""scripts/stats-identity.py compares snapshots byte by byte, except host-side fields."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stats-identity.py"


def load():
    spec = importlib.util.spec_from_file_location("stats_identity", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def snapshot(d: Path, stats: dict, crash: str) -> Path:
    d.mkdir()
    (d / "w__asap-rp__default.stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    (d / "w__asap-rp__default.crash.json").write_text(crash)
    return d


def test_engine_events_is_not_compared_but_everything_else_is(tmp_path, capsys):
    si = load()
    stats = {"design": "asap-rp", "sim_time_ps": 1234, "engine_events": 100}
    a = snapshot(tmp_path / "a", stats, '{"images": 40}\n')
    b = snapshot(tmp_path / "b", dict(stats, engine_events=57), '{"images": 40}\n')
    assert si.compare(a, b) == 0
    # Written by the snapshot without the field, compared against one that still has it.
    c = tmp_path / "c"
    c.mkdir()
    (c / "w__asap-rp__default.stats.json").write_text(si.without_host_fields(json.dumps(stats)))
    (c / "w__asap-rp__default.crash.json").write_text('{"images": 40}\n')
    assert "engine_events" not in (c / "w__asap-rp__default.stats.json").read_text()
    assert si.compare(a, c) == 0
    # A simulated number differs: named, exit 1.
    d = snapshot(tmp_path / "d", dict(stats, sim_time_ps=1235), '{"images": 40}\n')
    assert si.compare(a, d) == 1
    assert "differs: w__asap-rp__default.stats.json" in capsys.readouterr().out
    # Crash reports stay byte-compared.
    e = snapshot(tmp_path / "e", stats, '{"images": 41}\n')
    assert si.compare(a, e) == 1
    assert "differs: w__asap-rp__default.crash.json" in capsys.readouterr().out
