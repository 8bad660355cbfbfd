"""
title: OpenClaw thinking
author: owc
description: The thinking level of OpenClaw's replies: a toggle under the composer, the level in the chat's Valves.
version: 0.1.0
"""

# owc's thinking Filter Function: installed and updated by `owc owui install`, attached to owc's models (never
# global). The logic lives in the installed `owc` package (owc/owui/thinking_filter.py); this file hands it Open
# WebUI's calls.

from owc.owui import thinking_filter


class Filter:
    Valves = thinking_filter.Valves
    UserValves = thinking_filter.UserValves

    def __init__(self):
        self.valves = self.Valves()
        self.toggle = True  # a switch under the composer; the inlet runs only while it is on
        self.icon = thinking_filter.ICON

    def inlet(self, body: dict, __user__: dict | None = None) -> dict:
        return thinking_filter.inlet(self.valves, body, __user__)
