"""The built-in trainer: the one package that imports torch at the top level (in its modules,
not here, so that `recipe run` can read these names without torch)."""

RESUME = "RECIPE_RESUME"  # set by `recipe run --resume`: a checkpoint folder or run directory
TERMINAL = "RECIPE_TERMINAL"  # set by `recipe run` when its output is a terminal: its width in columns
CRASH_AFTER = "RECIPE_TEST_CRASH_AFTER_STEP"  # tests: every rank dies abruptly after this step
LAUNCHED_AT = "RECIPE_LAUNCHED_AT"  # set by the launching command: its wall clock (epoch seconds) at launch
PHASES = ("data", "forward", "backward", "optimizer")  # the step phases metrics.jsonl times
