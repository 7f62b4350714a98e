"""One module per phase of the runbook; each reads like the step it automates."""
