"""
title: OpenClaw
author: owc
description: OpenClaw agent runs in Open WebUI chats, through owc's runtime (owc installed in Open WebUI's env).
version: 0.1.0
"""

# owc's Pipe Function: installed and updated by `owc owui install`. Everything lives in the installed `owc` package;
# this file only hands Open WebUI's calls to it (Open WebUI re-executes this file on every save).

from pydantic import BaseModel, Field


class Pipe:
    class Valves(BaseModel):
        GATEWAY_URL: str = Field(default="", description="OpenClaw Gateway WebSocket URL (else $OWC_GATEWAY_URL)")
        AGENT_ID: str = Field(default="", description="The agent whose runs this model shows (default: main)")
        GATEWAY_TOKEN: str = Field(
            default="", description="Gateway token (else GATEWAY_TOKEN_FILE or $OWC_GATEWAY_TOKEN)"
        )
        GATEWAY_TOKEN_FILE: str = Field(default="", description="A file holding the Gateway token (mode 0600)")

    def __init__(self):
        self.valves = self.Valves()

    def pipes(self):
        from owc.owui.pipe import pipes

        return pipes(self.valves)

    async def pipe(self, body: dict, __request__=None, __task__=None):
        from owc.owui.pipe import pipe

        return await pipe(self.valves, body, request=__request__, task=__task__)
