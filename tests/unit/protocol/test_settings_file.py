"""The per-job settings file: the newest decision plus earlier ones for other node sets, and
how a reader picks the document for its nodes."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from slurm_sched.model import JobSettings, Placement
from slurm_sched.protocol.settings_file import (
    EARLIER_KEPT,
    SettingsStore,
    settings_entries,
    settings_entry_for,
    settings_from_document,
)


def _write(store: SettingsStore, steps: int, nodes: dict[str, list[int]] | None) -> None:
    placement = Placement.of(nodes) if nodes is not None else None
    store.write_settings("7", JobSettings(accumulation_steps=steps), placement)


def test_a_new_decision_keeps_the_earlier_ones_of_other_nodes_newest_first(tmp_path: Path):
    store = SettingsStore(tmp_path)
    _write(store, 1, {"a100-1": [0]})
    _write(store, 2, {"a100-2": [0]})
    _write(store, 3, {"a100-1": [1]})  # a100-1 again: replaces the decision of step 1
    doc = store.read_settings("7")
    assert doc is not None
    steps = [e["accumulation_steps"] for e in settings_entries(doc)]
    assert steps == [3, 2]
    assert all("earlier" not in e for e in settings_entries(doc))
    on_first = settings_entry_for(doc, nodes=["a100-1"], node_count=1)
    assert on_first is not None and settings_from_document(on_first).accumulation_steps == 3
    on_second = settings_entry_for(doc, nodes=["a100-2"])
    assert on_second is not None and on_second["accumulation_steps"] == 2
    assert settings_entry_for(doc, nodes=["a100-3"]) is None


def test_the_file_keeps_a_bounded_number_of_earlier_decisions(tmp_path: Path):
    store = SettingsStore(tmp_path)
    for i in range(EARLIER_KEPT + 3):
        _write(store, i + 1, {f"n{i}": [0]})
    entries = settings_entries(store.read_settings("7"))
    assert len(entries) == EARLIER_KEPT + 1
    assert [e["accumulation_steps"] for e in entries] == list(range(EARLIER_KEPT + 3, 2, -1))


def test_decisions_written_before_the_jobs_submission_are_not_kept(tmp_path: Path):
    """Slurm may give a new job the id of an old one: the old job's decisions do not carry over."""
    store = SettingsStore(tmp_path)
    _write(store, 1, {"a100-1": [0]})  # the old job's decision, written at 1,000 s
    old = store.read_settings("7")
    assert old is not None
    store.settings_path("7").write_text(json.dumps({**old, "written_at": 1000.0}))
    submitted = 2000.0
    store.write_settings(
        "7", JobSettings(accumulation_steps=2), Placement.of({"a100-2": [0]}), since_s=submitted
    )
    assert [e["accumulation_steps"] for e in settings_entries(store.read_settings("7"))] == [2]
    store.write_settings(
        "7", JobSettings(accumulation_steps=3), Placement.of({"a100-3": [0]}), since_s=submitted
    )
    assert [e["accumulation_steps"] for e in settings_entries(store.read_settings("7"))] == [3, 2]


def test_a_document_without_a_placement_fits_any_run(tmp_path: Path):
    store = SettingsStore(tmp_path)
    _write(store, 5, None)
    doc = store.read_settings("7")
    entry = settings_entry_for(doc, nodes=["anywhere"], node_count=3)
    assert entry is not None and entry["accumulation_steps"] == 5


def test_a_multi_node_run_needs_every_node_and_the_node_count(tmp_path: Path):
    store = SettingsStore(tmp_path)
    _write(store, 2, {"a": [0], "b": [0]})
    doc = store.read_settings("7")
    assert settings_entry_for(doc, nodes=["a", "b"], node_count=2) is not None
    assert settings_entry_for(doc, nodes=["b"]) is not None
    assert settings_entry_for(doc, nodes=["a"], node_count=1) is None
    assert settings_entry_for(doc, nodes=["a", "c"]) is None


def test_read_only_store_writes_nothing(tmp_path: Path):
    SettingsStore(tmp_path, read_only=True).write_settings("7", JobSettings(), None)
    assert not (tmp_path / "7.json").exists()


def test_malformed_earlier_entries_are_skipped():
    doc = {
        "job_id": "7",
        "gpus_per_node": {"a": 1},
        "earlier": ["x", 3, {"gpus_per_node": {"b": 1}}],
    }
    assert [e["gpus_per_node"] for e in settings_entries(doc)] == [{"a": 1}, {"b": 1}]
    assert settings_entries(None) == []
    assert settings_entries(json.loads('{"earlier": {"not": "a list"}}')) == [{}]


_node = st.sampled_from(["a", "b", "c", "d", "e", "f", "g"])


@given(st.lists(st.sets(_node, min_size=1, max_size=3), min_size=1, max_size=12))
def test_the_newest_decision_for_any_node_set_written_lately_is_found(node_sets):
    """Whatever sequence of decisions was written, the newest document is the last decision,
    and every node set among the last distinct ones still has its newest decision."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        store = SettingsStore(d)
        for i, nodes in enumerate(node_sets):
            _write(store, i + 1, {n: [0] for n in sorted(nodes)})
        doc = store.read_settings("7")
        entries = settings_entries(doc)
        assert entries[0]["accumulation_steps"] == len(node_sets)
        recent: list[frozenset[str]] = []
        for nodes in reversed(node_sets):
            if frozenset(nodes) not in recent:
                recent.append(frozenset(nodes))
        for nodes in recent[: EARLIER_KEPT + 1]:
            newest = max(i for i, s in enumerate(node_sets) if frozenset(s) == nodes) + 1
            entry = settings_entry_for(doc, nodes=sorted(nodes), node_count=len(nodes))
            assert entry is not None and entry["accumulation_steps"] == newest
