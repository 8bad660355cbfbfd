"""A protocol-faithful OpenClaw Gateway simulator (Trio + trio-websocket), with fault injection."""

from owc.sim.devices import Devices, PairingRefused
from owc.sim.script import (
    CANNED_ANSWER,
    Ask,
    Delay,
    End,
    Hold,
    Media,
    Spawn,
    Text,
    Then,
    Tool,
    default_recovery,
    fake_model_responder,
)
from owc.sim.server import RESTART_MODES, SimConn, SimRun, Simulator, open_simulator

__all__ = [
    "CANNED_ANSWER",
    "RESTART_MODES",
    "Ask",
    "Delay",
    "Devices",
    "End",
    "Hold",
    "Media",
    "PairingRefused",
    "SimConn",
    "SimRun",
    "Simulator",
    "Spawn",
    "Text",
    "Then",
    "Tool",
    "default_recovery",
    "fake_model_responder",
    "open_simulator",
]
