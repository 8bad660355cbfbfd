"""owc inside Open WebUI: the shell that hosts owc's Trio runtime in Open WebUI's own asyncio process (issue 12).

``trio_host.py`` holds the host bridge (``TrioHost``): Trio as a guest on Open WebUI's event loop, once per
process, with calls and cancellation crossing both ways. ``process.py`` holds what runs in it: the process's one owc
runtime, its settings, its start (the guest's main) and its close. This package is a shell (it imports Trio, anyio
and Open WebUI); the sans-I/O core never imports it (``tests/test_core_purity.py``).
"""
