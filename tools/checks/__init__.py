"""State checks of a GPU host: each returns a CheckResult, none raises for a problem it was built to find."""
