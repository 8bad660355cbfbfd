"""
title: OpenClaw startup
author: owc
description: Starts owc's runtime when Open WebUI starts, so agent turns reach open chats before anyone sends a message.
version: 0.1.0
"""

# owc's startup Event Function: installed by `owc owui install`. It hands Open WebUI's events to the installed package.


class Event:
    async def event(self, event: dict, __app__=None):
        from owc.owui.pipe import on_event

        await on_event(event, __app__)
