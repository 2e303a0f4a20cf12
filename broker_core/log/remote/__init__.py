"""The broker's side of the remote tier (KIP-405): reading tiered segments back for fetches and offsets."""
