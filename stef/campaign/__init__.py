"""Campaign mode (DESIGN.md §7, seeds/003): gold audit, sandboxed execution of agent answers on a
test database, and the classification of every run.

Source: the experimental protocol ``seeds/003_7e3f1b24b92db84a.txt`` (Portuguese; "Protocolo de
avaliação experimental"), DESIGN.md §7 and issue 6. One question = one session = one run. For
campaign mode ``mcp`` each run is checked in the seed's order — tool-call budget, syntax of each
statement (sqlglot, configured dialect), structure against a canonical catalog, read-only
execution on the test database, comparison with the gold statements G_i — and gets the first
matching class of :class:`~stef.campaign.models.RunOutcome`. In ``baseline-static`` (schema in
the prompt, 0 tool calls) only the final answer is compared with G_i
(:class:`~stef.campaign.models.BaselineOutcome`); the six classes, latency, tokens and cost are
not metrics of that mode ("Taxonomia MCP ... não se aplica ao baseline").

Modules (pure apart from :mod:`~stef.campaign.evidence`, which writes the per-run JSON files, and
the sandbox; no Prefect, no DuckDB warehouse):

* :mod:`~stef.campaign.models` — the data types (run logs, gold battery, settings, results).
* :mod:`~stef.campaign.inputs` — reading run logs, gold batteries and catalogs; JSON Schemas.
* :mod:`~stef.campaign.sandbox` and :mod:`~stef.campaign.worker` — sandboxed, read-only execution.
* :mod:`~stef.campaign.gold_audit` — execute every G_i first.
* :mod:`~stef.campaign.compare` — result-set comparison with G_i.
* :mod:`~stef.campaign.classify` — one run -> its outcome class (and cost).
* :mod:`~stef.campaign.summary` — per-campaign figures.
* :mod:`~stef.campaign.evidence` — ``metrics.json``, ``context.json``, ``session.jsonl``, ``summary.json``.
* :mod:`~stef.campaign.run` — the whole campaign (:func:`~stef.campaign.run.run_campaign`).
* :mod:`~stef.campaign.calibration` — Φ against the outcome (AUROC, confusion matrices).

The steps, each from its module::

    audit = gold_audit.audit_gold(gold, db, settings)                 # execute every G_i first
    result = classify.classify_run(run, audit, db, catalog, settings) # one run -> CampaignRunResult
    summary_ = summary.summarize(results, settings)                   # per campaign_id
    report = calibration.calibration_report(results, evaluations)     # Φ vs outcome (AUROC, confusion)
"""

from __future__ import annotations
