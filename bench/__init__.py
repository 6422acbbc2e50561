"""echomq-bench: measures a Lua-scripted Redis job queue under load."""
