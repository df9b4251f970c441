"""The keys of the resume check: run R, stopped at a checkpoint and resumed (docs/resume.md)."""

from __future__ import annotations

from repro_gate.config.keys.base import RESUME, ConfigKey, Kind

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("resume.after", Kind.INTEGER,
              "resume check: stop run R after its first checkpoint at or after optimizer step"
              " STEP and resume it (default: no resume check)",
              ("--resume-after",), group=RESUME, metavar="STEP", action_input="resume-after",
              doc="the resume check ([docs/resume.md](docs/resume.md)): run R stops at the first"
                  " step after a checkpoint written at or after this optimizer step, resumes"
                  " from it, and must continue as run A did",
              doc_default="no resume check",
              input_description="Resume check: run R stops after its first checkpoint written at"
                                " or after this optimizer step and is resumed from it; it must"
                                " continue as run A did. Empty: the config file's resume.after,"
                                " else no resume check.",
              input_doc="Resume check ([docs/resume.md](resume.md)): run R stops after its first"
                        " checkpoint written at or after this optimizer step and is resumed from"
                        " it; it must continue as run A did. Default: the config's"
                        " `resume.after`, else no resume check."),
    ConfigKey("resume.command", Kind.TEXT,
              "resume check: the command that resumes from $REPRO_GATE_RESUME_CHECKPOINT"
              " (default: the training's own command)",
              ("--resume-command",), group=RESUME, metavar="CMD",
              action_input="resume-command",
              doc="the command that resumes run R, in the same working copy, with"
                  " `REPRO_GATE_RESUME_CHECKPOINT` and `REPRO_GATE_RESUME_STEP` set, run by"
                  " `/bin/sh -c` as written",
              doc_default="the training's command",
              input_description="Resume check: the command that resumes run R from"
                                " $REPRO_GATE_RESUME_CHECKPOINT, run by /bin/sh -c. Empty: the"
                                " config file's resume.command, else the training's command.",
              input_doc="Resume check: the command that resumes run R from"
                        " `$REPRO_GATE_RESUME_CHECKPOINT`, run by `/bin/sh -c`. Default: the"
                        " config's `resume.command`, else the training's command."),
)
