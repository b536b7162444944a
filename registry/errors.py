"""The one exception type the CLI turns into a message and an exit code."""


class RecipeError(Exception):
    """A problem with the user's input: printed as one line, never a traceback.

    exit_code follows the CLI contract: 1 for an invalid recipe, 2 for a usage error or an
    unknown name.
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
