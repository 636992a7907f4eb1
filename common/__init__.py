"""Framework-free helpers shared by every notebook: hyperparameters, data, timing, environment facts, results.

Nothing in this package imports a deep-learning framework, and it runs on Python 3.6 to 3.12
with numpy 1.19 to 2.x, because the oldest framework environments import it too.
"""

__version__ = "0.1.0"
