"""Exception types the testbed raises for a user's mistake, each naming what is at fault."""


class TestbedError(Exception):
    """Base of every error the testbed raises on bad input."""


class ModelError(TestbedError, ValueError):
    """A model file or graph is malformed, or uses something the testbed cannot run.

    A ValueError too, since LiteRT raises ValueError where this is raised.
    """


class ScenarioError(TestbedError):
    """A scenario file is malformed: names the file, line and key."""


class DelegateError(TestbedError):
    """A delegate failed to initialise, prepare or invoke."""


class ProfileError(TestbedError):
    """A device profile file is malformed or missing: names the file, line and key."""
