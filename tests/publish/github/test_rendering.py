"""What is posted for a manifest: the gate's rendering and the manifest as it is posted."""

from __future__ import annotations

from repro_gate.publish.github.rendering import GATE_RENDERING, as_posted


def test_the_gate_posts_its_verdict_ops_and_the_marker_of_its_name() -> None:
    manifest = {"verdict": "fail", "nondeterministic_ops": [{"op": "index_add_"}]}
    assert GATE_RENDERING.verdict(manifest) == "fail"
    assert GATE_RENDERING.ops(manifest) == [{"op": "index_add_"}]
    assert GATE_RENDERING.name("nightly") == "nightly"
    assert "nightly" in GATE_RENDERING.marker("nightly")


def test_a_posted_manifest_links_its_run_and_is_no_longer_deferred() -> None:
    posted = as_posted({"verdict": "pass", "reporting": {"deferred": True}}, "https://run")
    assert posted["reporting"] == {"run_url": "https://run", "deferred": False}
