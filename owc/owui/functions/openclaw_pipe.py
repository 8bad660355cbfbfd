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
        # Each description says the default (an empty valve falls back to it). A secret valve is a masked input
        # in Open WebUI 0.12.4's valve form ({"input": {"type": "password"}}: its SensitiveInput, shown as dots
        # with an eye button to reveal). A saved connection valve applies at once: owc reconnects with it.
        GATEWAY_URL: str = Field(
            default="",
            description="The OpenClaw Gateway's address (`ws://`, `wss://`, `https://host` or `host:port`)."
            " Default: `OWC_GATEWAY_URL`, else ws://127.0.0.1:18789",
        )
        AGENT_ID: str = Field(default="", description="The agent whose runs this model shows. Default: main")
        GATEWAY_TOKEN: str = Field(
            default="",
            description="The Gateway's token (gateway.auth.token on the Gateway host), masked."
            " Default: `OWC_GATEWAY_TOKEN`, else the file GATEWAY_TOKEN_FILE names",
            json_schema_extra={"input": {"type": "password"}},
        )
        GATEWAY_TOKEN_FILE: str = Field(
            default="",
            description="A file holding the Gateway's token (mode 0600), read when GATEWAY_TOKEN is empty."
            " Default: `OWC_GATEWAY_TOKEN_FILE`, else none",
        )
        DEVICE_DIR: str = Field(
            default="",
            description="Folder of owc's device identity, which a Gateway on another host pairs ('off': the token"
            " alone, enough only on the Gateway's own host). Default: `OWC_DEVICE_DIR`, else DATA_DIR/owc",
        )
        GATEWAY_CA_FILE: str = Field(
            default="",
            description="wss://: a CA file to trust besides the system's. Default: `OWC_GATEWAY_CA_FILE`, else none",
        )
        GATEWAY_TLS_PIN: str = Field(
            default="",
            description="wss://: the Gateway certificate's SHA-256 fingerprint, to accept only it."
            " Default: `OWC_GATEWAY_TLS_PIN`, else none",
        )
        MODEL_WHITELIST: str = Field(
            default="",
            description="Gateway models to list, comma-separated (keys, ids, names or aliases)."
            " Default: empty (the first MAX_MODELS of the Gateway's models)",
        )
        MAX_MODELS: int = Field(
            default=30, description="At most this many Gateway models, without a whitelist (1-100). Default: 30"
        )
        AGENT_WHITELIST: str = Field(
            default="",
            description="The Gateway's other agents to list, each as its own model, comma-separated (ids or names)."
            " Default: empty (every agent the Gateway has)",
        )
        AGENT_MODELS: str = Field(
            default="",
            description="Listed agents whose Gateway models are listed too (comma-separated agent ids), where the"
            " Gateway lets a turn pick its model. Default: empty (only AGENT_ID's)",
        )
        DEFAULT_MODEL: str = Field(
            default="",
            description='The Gateway model (provider/model) the "OpenClaw" entry uses, chosen from the models owc'
            " last listed. Default: empty (the agent's own default model)",
            # Open WebUI 0.12.4 renders a select whose options a string names: a method of this class, called
            # when the valves open (utils/plugin.py, resolve_valves_schema_options).
            json_schema_extra={"input": {"type": "select", "options": "get_model_options"}},
        )
        USAGE_LINE: bool = Field(
            default=True,
            description="After each reply, a status line with the context used, the provider's rate limits and"
            " the agent's goal, as the Gateway reports them. Default: on",
        )
        # Chats made with the old Pipe (Function id openclaw_gateway) carry its presets as model ids; owc installed
        # under that id answers them with these models (owc.owui.models.resolve).
        CHATGPT_MODEL: str = Field(
            default="openai/gpt-5.5",
            description="For chats made with the old Pipe's ChatGPT preset (openclaw_gateway.chatgpt): the Gateway"
            " model they use. Default: openai/gpt-5.5",
        )
        OPUS_MODEL: str = Field(
            default="anthropic/claude-opus-4-8",
            description="For chats made with the old Pipe's Opus preset (openclaw_gateway.opus): the Gateway model"
            " they use. Default: anthropic/claude-opus-4-8",
        )
        SONNET_MODEL: str = Field(
            default="anthropic/claude-sonnet-5",
            description="For chats made with the old Pipe's Sonnet preset (openclaw_gateway.sonnet): the Gateway"
            " model they use. Default: anthropic/claude-sonnet-5",
        )
        GLM_MODEL: str = Field(
            default="openrouter/z-ai/glm-5.2",
            description="For chats made with the old Pipe's GLM preset (openclaw_gateway.glm): the Gateway model"
            " they use. Default: openrouter/z-ai/glm-5.2",
        )

        @classmethod
        def get_model_options(cls):
            """DEFAULT_MODEL's choices: the agent's own default, the Gateway's models, the saved value. A list
            always: Open WebUI would show a failed method's name as the options."""
            try:
                from owc.owui.process import default_model_options

                return default_model_options()
            except Exception:
                return [{"value": "", "label": "The agent's own default"}]

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
