"""The Trio shell around the protocol core: owc's connection to an OpenClaw Gateway."""

from owc.gateway.backoff import Backoff
from owc.gateway.connection import (
    CloseInfo,
    Connection,
    ConnectionHandler,
    ConnectionRuns,
    GatewayClient,
    GatewayConfig,
    HelloInfo,
    NullHandler,
    open_gateway_connection,
)
from owc.gateway.errors import (
    GatewayError,
    MissingScopes,
    NotAWebSocket,
    NotConnected,
    PayloadTooLarge,
    Refused,
    ReplyTooLarge,
    RequestError,
    RequestTimeout,
    SessionClosed,
)
from owc.protocol.active import ActiveRuns, Resync

__all__ = [
    "ActiveRuns",
    "Backoff",
    "CloseInfo",
    "Connection",
    "ConnectionHandler",
    "ConnectionRuns",
    "GatewayClient",
    "GatewayConfig",
    "GatewayError",
    "HelloInfo",
    "MissingScopes",
    "NotAWebSocket",
    "NotConnected",
    "NullHandler",
    "PayloadTooLarge",
    "Refused",
    "ReplyTooLarge",
    "RequestError",
    "RequestTimeout",
    "Resync",
    "SessionClosed",
    "open_gateway_connection",
]
