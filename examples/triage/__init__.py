"""The incident-triage probe example: a log-line generator and a simulated triage agent with realistic flaws."""
