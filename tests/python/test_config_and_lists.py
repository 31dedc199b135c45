"""`pmsim config show`, `pmsim designs`, `pmsim workloads`."""

from __future__ import annotations

import re

import pmsim


def test_config_show_lists_every_parameter_with_unit(cli):
    out = cli("config", "show", check=True).stdout
    params = pmsim.config_params()
    assert len(params) >= 30
    section = None
    seen = {}
    for line in out.splitlines():
        if m := re.fullmatch(r"\[(\w+)\]", line):
            section = m.group(1)
        elif line.strip():
            m = re.fullmatch(r"(\w+) = (\S+)  # (\[[^\]]+\] )?(.+)", line)
            assert m, line
            seen[f"{section}.{m.group(1)}"] = (m.group(2), m.group(3) or "")
    assert set(seen) == {name for name, _, _ in params}
    for name, unit, help_ in params:
        assert help_
        if unit:
            assert seen[name][1] == f"[{unit}] ", (name, seen[name])
    assert seen["pm.write_ns"] == ("90.0", "[ns] ")
    assert seen["core.count"][0] == "4"


def test_config_show_reflects_overrides(cli):
    out = cli("config", "show", "--set", "pm.write_ns=123", "--set", "mc_count=4", check=True).stdout
    assert re.search(r"^write_ns = 123(\.0)?  # \[ns\]", out, re.M), out
    assert re.search(r"^count = 4  # \[MCs\]", out, re.M)
    assert "pm_write_ns" not in out
    assert "write_ns = 123" in pmsim.config_show(pm_write_ns=123)


def test_overrides_that_constrain_each_other_apply_together(cli):
    # A 48 KiB 12-way L1 is valid, though 48 KiB beside the default 8 ways is not: the overrides
    # are validated together, in whatever order they are given, on the command line and in
    # the Python API.
    for order in (["l1.size_kib=48", "l1.ways=12"], ["l1.ways=12", "l1.size_kib=48"]):
        args = [a for kv in order for a in ("--set", kv)]
        r = cli("run", "--workload", "array", "-p", "ops=20", "--design", "baseline", "--json", *args)
        assert r.returncode == 0, r.stderr
    stats = pmsim.run(
        "broi", workload="array", ops=20, pm_model="banked", bank_drain_high_pct=10, bank_drain_low_pct=5
    )
    assert stats["operations"] == 4 * 20
    r = cli("run", "--workload", "array", "-p", "ops=20", "--design", "baseline", "--set", "l1.size_kib=48")
    assert r.returncode == 2 and "l1.size_kib" in r.stderr and "power-of-two number of sets" in r.stderr


def test_config_show_is_a_loadable_config(cli, tmp_path):
    shown = cli("config", "show", "--set", "pm.write_ns=123", check=True).stdout
    f = tmp_path / "c.toml"
    f.write_text(shown)
    assert cli("config", "show", "--config", f, check=True).stdout == shown


def test_designs_lists_baseline_and_eadr(cli):
    out = cli("designs", check=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert {"baseline", "eadr"} <= set(names)
    assert names == [d for d, _ in pmsim.designs()]


def test_workloads_lists_every_workload_with_its_parameters(cli):
    out = cli("workloads", check=True).stdout
    listed = {}
    current = None
    for line in out.splitlines():
        if not line.startswith(" "):
            current = line.split(":", 1)[0]
            listed[current] = set()
        else:
            listed[current].add(line.split()[0])
    api = pmsim.workloads()
    assert {"array", "bandwidth", "nstore"} <= set(listed)
    assert set(listed) == {w["name"] for w in api}
    for w in api:
        assert {"threads", "ops", "seed"} <= listed[w["name"]]
        assert listed[w["name"]] == {p["name"] for p in w["params"]}, w["name"]
