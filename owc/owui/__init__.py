"""owc inside Open WebUI: the shell that hosts owc's Trio runtime in Open WebUI's own asyncio process (issue 12).

``guest.py`` is the host bridge: Trio as a guest on Open WebUI's event loop, once per process, with calls and
cancellation crossing both ways. This package is a shell (it imports Trio and, later, Open WebUI); the sans-I/O
core never imports it (``tests/test_core_purity.py``).
"""
