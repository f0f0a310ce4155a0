"""engines.py: how many cores `-T 0` takes."""

from shazip.hardware import cgroup_cpu_quota


def test_cgroup_quota_limits_the_cores(tmp_path):
    """docker --cpus 1.5 writes "150000 100000" (v2) or the two cfs files (v1): 2 threads; no
    quota ("max", -1, or no files) leaves the affinity alone."""
    assert cgroup_cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_quota(tmp_path) == 1.5
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(v1) is None
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    assert cgroup_cpu_quota(v1) == 0.5
