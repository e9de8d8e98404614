"""Progressive lowering from µGraphs to GPU code, and the code printers."""
