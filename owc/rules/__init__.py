"""The rules of owc, pure (no Trio, no I/O): a run's lifecycle (``lifecycle``), and next the owner rule and
link rule E. The shells (``owc.runs``) feed them inputs and do what they answer."""
