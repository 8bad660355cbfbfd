"""What owc offers its operator over the network: the status endpoint ``owc run`` serves (``owc.ops.http``)."""
