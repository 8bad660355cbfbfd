"""owc: the Trio runtime that puts OpenClaw agent runs into Open WebUI chats.

The sans-I/O core (``ids``, ``protocol``; later ``render`` and ``rules``) imports no Trio; the shells around
it (gateway, runs, store, emit, owui, sim, cli) do, and depend on the core, never the reverse.
"""

__version__ = "0.1.0"
