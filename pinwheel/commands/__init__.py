"""The command line's commands, by room; pinwheel.cli parses and dispatches."""
