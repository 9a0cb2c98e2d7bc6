"""What benchmark results record about the machine and its packages."""

from importlib.metadata import version

from slurm_sched.hostinfo import RESULT_PACKAGES, package_versions


def test_package_versions_names_installed_and_missing_distributions():
    got = package_versions()
    assert set(got) == set(RESULT_PACKAGES)
    assert got["numpy"] == version("numpy") and got["scipy"] == version("scipy")
    assert package_versions(("no-such-distribution-xyz",)) == {"no-such-distribution-xyz": None}
