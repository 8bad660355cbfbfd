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
        DEVICE_DIR: str = Field(
            default="",
            description="Folder of owc's device identity, which a Gateway on another host pairs (default"
            " DATA_DIR/owc; 'off': the token alone, enough only on the Gateway's own host)",
        )
        GATEWAY_CA_FILE: str = Field(default="", description="wss://: a CA file to trust besides the system's")
        GATEWAY_TLS_PIN: str = Field(
            default="", description="wss://: the Gateway certificate's SHA-256 fingerprint, to accept only it"
        )
        MODEL_WHITELIST: str = Field(
            default="", description="Gateway models to list, comma-separated (keys, ids, names or aliases)"
        )
        MAX_MODELS: int = Field(default=30, description="At most this many Gateway models (without a whitelist)")

    def __init__(self):
        self.valves = self.Valves()

    async def pipes(self):
        from owc.owui.pipe import pipes

        return await pipes(self.valves)

    async def pipe(
        self,
        body: dict,
        __user__=None,
        __metadata__=None,
        __request__=None,
        __task__=None,
        __task_body__=None,
        __event_emitter__=None,
    ):
        from owc.owui.pipe import pipe

        return await pipe(
            self.valves,
            body,
            user=__user__,
            metadata=__metadata__,
            request=__request__,
            task=__task__,
            task_body=__task_body__,
            event_emitter=__event_emitter__,
        )
