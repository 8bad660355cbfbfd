"""OpenClaw Gateway protocol 4, as a pure model: no I/O, no Trio.

The Trio shells (``owc.gateway``, ``owc.sim``) feed it bytes and act on what it returns, in the manner of
h11 and wsproto: the protocol's rules live here, where they can be tested without a socket.
"""

from owc.protocol.errors import ErrorShape, FrameTooLarge, ProtocolError
from owc.protocol.events import (
    AgentEvent,
    AssistantData,
    ChatEvent,
    Event,
    EventDecoder,
    ItemData,
    LifecycleData,
    OtherEvent,
    SessionsChanged,
    Shutdown,
    Tick,
    ToolData,
    parse_event,
)
from owc.protocol.frames import (
    DEFAULT_MAX_PAYLOAD,
    EventFrame,
    Frame,
    Request,
    Response,
    decode_frame,
    encode_frame,
    frame_from_json,
    repair_json,
    response_id,
)
from owc.protocol.handshake import (
    PROTOCOL_VERSION,
    ConnectChallenge,
    ConnectParams,
    HelloOk,
    Policy,
    parse_challenge,
    parse_hello_ok,
)
from owc.protocol.results import (
    RESULT_PARSERS,
    ChatAbortResult,
    ChatHistory,
    ChatSendResult,
    HistoryMessage,
    Provenance,
    SessionRow,
    SessionsList,
    SubscribeResult,
    TextPart,
    ToolCallPart,
    older_page,
    parse_chat_abort,
    parse_chat_history,
    parse_chat_send,
    parse_describe,
    parse_sessions_list,
    parse_subscribe,
)
from owc.protocol.seq import SeqResult, SeqStatus, SeqTracker

__all__ = [name for name in dir() if not name.startswith("_")]
