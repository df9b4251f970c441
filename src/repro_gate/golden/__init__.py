"""Golden trajectories: a passing run's numbers kept in the repository, and every gate's run A
compared with them.

`document.py` the golden document (made from a run, read, written, validated);
`summaries.py` an artifact's sha256 and tensor summaries; `machine_class.py` the machine class
and its file-name slug; `select.py` which golden file a run is compared with; `comparison.py`
run against golden, step by step and artifact by artifact; `renames.py` run A under the
golden file's tensor names, when a rename is all that tells them apart; `history.py` what git
says (files changed since the golden's commit, the base branch's golden); `attribution.py` code
or environment; `rebuild.py` run G, the code in the golden file's rebuilt lock; `check.py` the
gate's comparison, assembled into `comparison.golden`; `bless.py` `repro-gate bless`;
`candidate.py` a run's golden file in the output directory, for CI to upload.
"""
