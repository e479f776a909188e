"""The Interaction protocol buffers, with the original TAPAS release's messages and field numbers."""
