"""The instructions stage: Redis's cost in instructions (callgrind), which steal cannot move."""
