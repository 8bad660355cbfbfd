"""
title: OpenClaw status
author: owc
description: The chat's OpenClaw session: context, rate limits, goal, sub-agents live, and Compact.
version: 0.1.0
"""

# owc's status Action Function: installed and updated by `owc owui install`, attached to owc's models (never global).
# The logic lives in the installed `owc` package (owc/owui/status_action.py); this file hands it Open WebUI's calls.

from owc.owui import status_action


class Action:
    Valves = status_action.Valves
    icon_url = status_action.ICON  # the button's icon (Open WebUI reads `icon_url` from this class's instance)

    def __init__(self):
        self.valves = self.Valves()

    async def action(self, body: dict, __user__=None, __event_call__=None):
        return await status_action.action(body, __user__, __event_call__)
