"""The real Open WebUI 0.12.4 tier: its own package, in a separate cached venv, driven through ``owui_side.py``.

``venv.py`` builds the venv (``open-webui==0.12.4 --no-deps`` plus the minimal set its DB layer needs) outside
the checkout and runs ``owui_side.py`` in it; ``owui_side.py`` imports ``open_webui`` (never ``owc``) and prints
one JSON object per call.
"""
