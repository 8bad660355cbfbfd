"""The real OpenClaw Gateway tier: install (cached outside the checkout), start offline, stop by pid."""
